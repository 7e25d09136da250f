/**
 * The Reporter's hold on its state (client/state.py): the store (IndexedDB in browsers, a
 * directory of files in Node, or memory), opened on first use with the install's memo secret
 * and the collector's clock, reopened after a failure at most every STATE_RETRY_SECONDS, and
 * closed by `close()`.
 */

import type { ServerClock } from "./clock.js";
import { LdptelError } from "./errors.js";
import { fromHex, hex, sha256, utf8 } from "./hash.js";
import type { Randomness } from "./random.js";
import { defaultStateDir, isBrowser } from "./settings.js";
import { type BatchRow, now } from "./spool.js";
import { FileStore, IndexedDbStore, MemoryStore, type Store, type Tx } from "./store.js";

const STATE_RETRY_SECONDS = 30;

export class State {
  /** Open, or null (not yet, or after `close()`). */
  store: Store | null = null;
  closed = false;
  private opening: Promise<Store | null> | null = null;
  private failedAt = -Infinity;
  private secret: Uint8Array | null = null;

  constructor(
    private readonly token: string,
    private readonly stateDir: string | null | undefined,
    private readonly rng: Randomness,
    private readonly clock: ServerClock,
  ) {}

  /** The install's memo secret (set once the store is open). */
  get memoSecret(): Uint8Array {
    return this.secret as Uint8Array;
  }

  /** The store, opened on first use; throws state_error (retried every 30 s). */
  async open(): Promise<Store> {
    if (this.store) return this.store;
    if (now() - this.failedAt < STATE_RETRY_SECONDS && !this.opening) {
      throw new LdptelError("state_error", "state", "the state cannot be opened (retrying every 30 s)");
    }
    this.opening ??= (async () => {
      try {
        const store = await this.openStore();
        await store.transact((tx) => this.load(store, tx));
        this.store = store;
        return store;
      } catch {
        this.failedAt = now();
        return null;
      } finally {
        this.opening = null;
      }
    })();
    const store = await this.opening;
    if (!store) throw new LdptelError("state_error", "state", "the state cannot be opened (stateDir unusable, or IndexedDB unavailable)");
    return store;
  }

  private async openStore(): Promise<Store> {
    if (isBrowser()) return IndexedDbStore.open(`ldptel-${hex(sha256(utf8(this.token))).slice(0, 16)}`);
    if (this.stateDir === null) return new MemoryStore();
    return FileStore.open(this.stateDir ?? (await defaultStateDir(this.token)));
  }

  /** The identity (memo secret), the clock, and the claims of senders gone. */
  private async load(store: Store, tx: Tx): Promise<void> {
    let identity = await tx.get<{ memoSecret: string }>("identity");
    if (!identity) {
      identity = { memoSecret: hex(this.rng.bytes(32)) };
      tx.put("identity", identity);
    }
    this.secret = fromHex(identity.memoSecret);
    this.clock.load(await tx.get("clock"));
    // A file store has one process (its lock file): every claim left is of a process
    // gone. Tabs sharing IndexedDB keep each other's claims until they expire.
    const exclusive = !(store instanceof IndexedDbStore);
    for (const [key, batch] of await tx.entries<BatchRow>("batch/")) {
      if (batch.claim && (exclusive || (batch.claimedUntil ?? 0) < now())) tx.put(key, { ...batch, claim: undefined });
    }
  }

  /** Closes the store (what is not delivered stays in it for the next Reporter). */
  async close(): Promise<void> {
    const store = this.store;
    this.store = null;
    await store?.close().catch(() => undefined);
  }
}
