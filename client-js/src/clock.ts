/**
 * The collector's clock (client/clock.py): the ledger's windows are the collector's, so the
 * client reads each answer's `Date` and carries it forward on the monotonic clock
 * (`performance.now()`), which no setting of the device clock moves. Before the first answer
 * in this process: the device clock plus the offset last learned, never earlier than the
 * latest collector time seen (both persisted).
 */

export interface SavedClock {
  offset: number;
  floor: number;
}

const monotonic = (): number => performance.now() / 1000;
const device = (): number => Date.now() / 1000;

export class ServerClock {
  private offset = 0;
  private floor = 0;
  private anchor: [number, number] | null = null;

  load(saved: SavedClock | undefined): void {
    if (!saved) return;
    if (Number.isFinite(saved.offset)) this.offset = saved.offset;
    if (Number.isFinite(saved.floor)) this.floor = Math.max(this.floor, saved.floor);
  }

  save(): SavedClock {
    return { offset: this.offset, floor: this.floor };
  }

  /** Whether an answer of the collector has set the clock in this process. */
  get synced(): boolean {
    return this.anchor !== null;
  }

  now(): number {
    if (this.anchor === null) return Math.max(device() + this.offset, this.floor);
    const [server, mono] = this.anchor;
    this.floor = Math.max(this.floor, server + (monotonic() - mono));
    return this.floor;
  }

  /** An answer's Date header (1 s resolution, at most 1 s behind); a missing one anchors
   * the current estimate, so that the sender is not stopped by it. */
  observe(header: string | null): void {
    const date = header ? Date.parse(header) / 1000 : Number.NaN;
    if (!Number.isFinite(date)) {
      if (this.anchor === null) this.anchor = [this.now(), monotonic()];
      return;
    }
    this.anchor = [date, monotonic()];
    this.offset = date - device();
    this.floor = Math.max(this.floor, date);
  }
}
