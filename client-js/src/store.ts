/**
 * The install's durable state (identity, ledger, memo, spool, batches, cached configs) as
 * keys and JSON values, changed only in atomic transactions: a report's ledger charge, memo
 * and spool row commit together or not at all (docs/client-js.md, "What is stored").
 *
 * - Node: files under `stateDir`: a snapshot and an append-only journal of committed
 *   transactions (one JSON line each; a torn last line, from a crash mid-write, is a
 *   transaction that never committed). A lock file keeps a second live process out.
 * - Browsers: IndexedDB, one database per ingest token; a transaction is one IndexedDB
 *   read-write transaction, so tabs of one origin share one ledger safely.
 */

export interface Tx {
  get<T>(key: string): Promise<T | undefined>;
  put(key: string, value: unknown): void;
  delete(key: string): void;
  /** Every [key, value] whose key starts with `prefix`, in key order. */
  entries<T>(prefix: string): Promise<[string, T][]>;
}

export interface Store {
  transact<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** Make every committed transaction durable (before a POST: what the collector may
   * store is never undone by a power loss). */
  sync(): Promise<void>;
  close(): Promise<void>;
}

/** Why the state cannot be used: "disk_full" or "state_error". */
export class StoreError extends Error {
  constructor(
    readonly kind: "disk_full" | "state_error",
    readonly reason: string,
  ) {
    super(reason);
    this.name = "StoreError";
  }
}

type Op = [string, unknown] | [string];

/** A serializing mutex: transactions run one after the other. */
class Queue {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn, fn);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/** Shared by the file store and tests: state in a sorted in-memory map, writes buffered. */
class Overlay implements Tx {
  readonly ops: Op[] = [];
  private readonly writes = new Map<string, { v: unknown } | null>();
  constructor(private readonly base: Map<string, unknown>) {}
  async get<T>(key: string): Promise<T | undefined> {
    const w = this.writes.get(key);
    if (w !== undefined) return w === null ? undefined : (w.v as T);
    return this.base.get(key) as T | undefined;
  }
  put(key: string, value: unknown): void {
    const copy = JSON.parse(JSON.stringify(value)) as unknown; // values are plain JSON
    this.writes.set(key, { v: copy });
    this.ops.push([key, copy]);
  }
  delete(key: string): void {
    this.writes.set(key, null);
    this.ops.push([key]);
  }
  async entries<T>(prefix: string): Promise<[string, T][]> {
    const found = new Map<string, unknown>();
    for (const [k, v] of this.base) if (k.startsWith(prefix)) found.set(k, v);
    for (const [k, w] of this.writes) {
      if (!k.startsWith(prefix)) continue;
      if (w === null) found.delete(k);
      else found.set(k, w.v);
    }
    return [...found.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) as [string, T][];
  }
}

function apply(map: Map<string, unknown>, ops: Op[]): void {
  for (const op of ops) {
    if (op.length === 2) map.set(op[0], op[1]);
    else map.delete(op[0]);
  }
}

/** State in memory only (Reporter({ stateDir: null }) in Node: nothing survives the process). */
export class MemoryStore implements Store {
  private readonly map = new Map<string, unknown>();
  private readonly queue = new Queue();
  transact<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.queue.run(async () => {
      const tx = new Overlay(this.map);
      const result = await fn(tx);
      apply(this.map, tx.ops);
      return result;
    });
  }
  async sync(): Promise<void> {}
  async close(): Promise<void> {}
}

const JOURNAL_LIMIT = 1 << 20;

function storeError(error: unknown): StoreError {
  const code = (error as { code?: string }).code;
  if (code === "ENOSPC" || code === "EDQUOT") return new StoreError("disk_full", "no space left where stateDir lives");
  if (error instanceof StoreError) return error;
  return new StoreError("state_error", `stateDir unusable (${code ?? "error"})`);
}

/** Files under a directory (Node). */
export class FileStore implements Store {
  private readonly queue = new Queue();
  private journalBytes = 0;
  private constructor(
    private readonly fs: typeof import("node:fs/promises"),
    private readonly dir: string,
    private readonly map: Map<string, unknown>,
    private journal: import("node:fs/promises").FileHandle,
  ) {}

  static async open(dir: string): Promise<FileStore> {
    const fs = await import("node:fs/promises");
    const path = await import("node:path");
    try {
      await fs.mkdir(dir, { recursive: true, mode: 0o700 });
      await FileStore.lock(fs, path.join(dir, "lock"));
      const map = new Map<string, unknown>();
      const snapshot = await fs.readFile(path.join(dir, "state.json"), "utf8").catch(() => "{}");
      for (const [k, v] of Object.entries(JSON.parse(snapshot) as Record<string, unknown>)) map.set(k, v);
      const journal = await fs.readFile(path.join(dir, "journal.jsonl"), "utf8").catch(() => "");
      for (const line of journal.split("\n")) {
        if (!line) continue;
        try {
          apply(map, JSON.parse(line) as Op[]);
        } catch {
          break; // a torn last line: that transaction never committed
        }
      }
      const store = new FileStore(fs, dir, map, await fs.open(path.join(dir, "journal.jsonl"), "a"));
      await store.compact();
      return store;
    } catch (error) {
      throw storeError(error);
    }
  }

  /** One live process per stateDir: a lock file naming its pid (a dead owner's is taken). */
  private static async lock(fs: typeof import("node:fs/promises"), file: string): Promise<void> {
    try {
      await fs.writeFile(file, String(process.pid), { flag: "wx" });
      return;
    } catch (error) {
      if ((error as { code?: string }).code !== "EEXIST") throw error;
    }
    const owner = Number(await fs.readFile(file, "utf8").catch(() => ""));
    if (owner && owner !== process.pid) {
      let alive = true;
      try {
        process.kill(owner, 0);
      } catch (error) {
        alive = (error as { code?: string }).code === "EPERM";
      }
      if (alive) throw new StoreError("state_error", "stateDir is in use by another live process");
    }
    await fs.writeFile(file, String(process.pid));
  }

  private path(name: string): string {
    return `${this.dir}/${name}`;
  }

  /** The map as a new snapshot (written, fsynced, renamed into place), journal emptied. */
  private async compact(): Promise<void> {
    const tmp = this.path("state.json.tmp");
    const handle = await this.fs.open(tmp, "w");
    try {
      await handle.writeFile(JSON.stringify(Object.fromEntries(this.map)));
      await handle.sync();
    } finally {
      await handle.close();
    }
    await this.fs.rename(tmp, this.path("state.json"));
    await this.journal.truncate(0);
    this.journalBytes = 0;
  }

  transact<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.queue.run(async () => {
      const tx = new Overlay(this.map);
      const result = await fn(tx);
      if (tx.ops.length) {
        const line = `${JSON.stringify(tx.ops)}\n`;
        try {
          await this.journal.write(line);
        } catch (error) {
          throw storeError(error);
        }
        apply(this.map, tx.ops);
        this.journalBytes += line.length;
        if (this.journalBytes > JOURNAL_LIMIT) await this.compact().catch(() => undefined);
      }
      return result;
    });
  }

  sync(): Promise<void> {
    return this.queue.run(() => this.journal.sync().catch(() => undefined));
  }

  close(): Promise<void> {
    return this.queue.run(async () => {
      await this.compact().catch(() => undefined);
      await this.journal.close().catch(() => undefined);
      await this.fs.rm(this.path("lock"), { force: true }).catch(() => undefined);
    });
  }
}

/** IndexedDB (browsers): one object store of keys and values. */
export class IndexedDbStore implements Store {
  private constructor(private readonly db: IDBDatabase) {}

  static open(name: string): Promise<IndexedDbStore> {
    return new Promise((resolve, reject) => {
      const request = indexedDB.open(name, 1);
      request.onupgradeneeded = () => request.result.createObjectStore("state");
      request.onsuccess = () => resolve(new IndexedDbStore(request.result));
      request.onerror = () => reject(new StoreError("state_error", "IndexedDB cannot be opened"));
      request.onblocked = () => reject(new StoreError("state_error", "IndexedDB is blocked"));
    });
  }

  transact<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const idb = this.db.transaction("state", "readwrite", { durability: "strict" });
      const os = idb.objectStore("state");
      const ask = <R>(request: IDBRequest<R>): Promise<R> =>
        new Promise((ok, fail) => {
          request.onsuccess = () => ok(request.result);
          request.onerror = () => fail(request.error);
        });
      const tx: Tx = {
        get: <V>(key: string) => ask(os.get(key)) as Promise<V | undefined>,
        put: (key, value) => void os.put(value, key),
        delete: (key) => void os.delete(key),
        entries: async <V>(prefix: string) => {
          const range = IDBKeyRange.bound(prefix, `${prefix}\uffff`);
          const [keys, values] = await Promise.all([ask(os.getAllKeys(range)), ask(os.getAll(range))]);
          return keys.map((k, i) => [String(k), values[i] as V]) as [string, V][];
        },
      };
      let result: T;
      idb.oncomplete = () => resolve(result);
      idb.onerror = () => reject(new StoreError(idb.error?.name === "QuotaExceededError" ? "disk_full" : "state_error", "IndexedDB transaction failed"));
      idb.onabort = () => reject(new StoreError(idb.error?.name === "QuotaExceededError" ? "disk_full" : "state_error", "IndexedDB transaction aborted"));
      fn(tx).then(
        (value) => {
          result = value;
        },
        (error: unknown) => {
          idb.onabort = () => reject(error);
          try {
            idb.abort();
          } catch {
            reject(error);
          }
        },
      );
    });
  }

  async sync(): Promise<void> {} // strict durability: committed transactions are on disk

  async close(): Promise<void> {
    this.db.close();
  }
}
