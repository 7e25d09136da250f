/**
 * The Reporter in Node against a scripted collector (a fetch that answers as the collector
 * does, or fails as networks and proxies do): what report() returns, that it never
 * rejects, what leaves the device, and the sender's retries (same idempotency key), splits
 * and dead letters; and a second Reporter on the same stateDir (same install).
 */

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { gunzipSync } from "node:zlib";
import { DeliveryError, type LdptelError, Reporter, type ReporterOptions } from "../src/index.js";
import { configId } from "../src/wire.js";
import { VECTORS } from "./paths.js";

// biome-ignore lint: vector JSON
type J = any;
const ledger: J = JSON.parse(readFileSync(new URL("ledger.json", VECTORS), "utf8"));

/** A served DE config over red, green, blue, cyan with room for `perWindow` reports. */
function served(perWindow: number): Record<string, unknown> {
  const { config_id: _id, ...config } = ledger.cases[0].config;
  const changed = { ...config, reports_per_window: perWindow, lifetime_epsilon: 1000 };
  return { ...changed, config_id: configId(changed) };
}

interface Post {
  url: string;
  key: string;
  headers: Record<string, string>;
  body: { campaign: string; config_id: string; reports: unknown[] };
}

/** A collector behind fetch: `plan` holds the fate of the next POSTs ("503", "413",
 * "400", "401", "html", "down"); GETs answer `config` (or 404 for another name). */
class FakeCollector {
  plan: string[] = [];
  posts: Post[] = [];
  gets = 0;
  down = false;
  date = new Date().toUTCString();
  constructor(public config: Record<string, unknown>) {}

  fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    if (this.down) throw new TypeError("fetch failed");
    const url = new URL(String(input));
    const headers = Object.fromEntries(new Headers(init?.headers).entries());
    const common = { Date: this.date, "Content-Type": "application/json" };
    if ((init?.method ?? "GET") === "GET") {
      this.gets += 1;
      if (url.pathname !== `/v1/campaigns/${this.config["name"]}`) {
        return new Response('{"error":{"field":"name","reason":"unknown campaign"}}', { status: 404, headers: common });
      }
      return new Response(JSON.stringify(this.config), { status: 200, headers: { ...common, ETag: `"${this.config["config_id"]}"` } });
    }
    const raw = Buffer.from(init?.body as Uint8Array);
    const text = headers["content-encoding"] === "gzip" ? gunzipSync(raw).toString() : raw.toString();
    const body = JSON.parse(text) as Post["body"];
    this.posts.push({ url: url.toString(), key: headers["idempotency-key"] as string, headers, body });
    const fate = this.plan.shift() ?? "";
    if (fate === "down") throw new TypeError("fetch failed");
    if (fate === "hang") {
      // Answers nothing until the caller's deadline aborts the request.
      // (A real request's socket keeps Node's event loop alive meanwhile; here a timer does.)
      const alive = setInterval(() => undefined, 1000);
      return new Promise((_, reject) =>
        init?.signal?.addEventListener("abort", () => {
          clearInterval(alive);
          reject(init.signal?.reason);
        }),
      );
    }
    if (fate.startsWith("redirect ")) {
      const [, status, location] = fate.split(" ");
      return new Response(null, { status: Number(status), headers: { ...common, Location: location as string } });
    }
    if (fate === "proxy404") return new Response("<html>Not Found</html>", { status: 404, headers: { "Content-Type": "text/html" } });
    if (fate === "html") return new Response("<html>hotel wifi</html>", { status: 200, headers: { "Content-Type": "text/html" } });
    if (/^\d+$/.test(fate)) {
      return new Response('{"error":{"field":"test","reason":"injected"}}', { status: Number(fate), headers: { ...common, "Retry-After": "0" } });
    }
    return new Response(JSON.stringify({ accepted: body.reports.length, duplicate: false }), { status: 202, headers: common });
  };
}

const FAST: ReporterOptions = { stateDir: null, backoffBaseMs: 5, backoffCapMs: 20, deliverOnExit: false };

function reporter(collector: FakeCollector, options: ReporterOptions = {}): [Reporter, LdptelError[]] {
  const errors: LdptelError[] = [];
  const made = new Reporter("http://collector.test/", "token-1", {
    ...FAST,
    fetch: collector.fetch,
    onError: (error) => errors.push(error),
    ...options,
  });
  return [made, errors];
}

test("a report is randomized, spooled and posted gzipped under an idempotency key", async () => {
  const collector = new FakeCollector(served(10));
  const [r] = reporter(collector);
  for (const value of ["red", "blue", "cyan"]) assert.equal(await r.report("colors", value), "spooled");
  assert.equal(await r.flush(5000), true);
  assert.equal(collector.posts.length, 1);
  const [post] = collector.posts as [Post];
  assert.match(post.key, /^[A-Za-z0-9_-]{1,128}$/);
  assert.equal(post.headers["authorization"], "Bearer token-1");
  assert.equal(post.headers["content-encoding"], "gzip");
  assert.equal(post.body.config_id, collector.config["config_id"]);
  assert.equal(post.body.reports.length, 3);
  for (const report of post.body.reports as { y: number }[]) {
    assert.deepEqual(Object.keys(report), ["y"]); // only the randomized index leaves
    assert.ok(Number.isInteger(report.y) && report.y >= 0 && report.y < 4);
  }
  const stats = await r.stats();
  assert.deepEqual([stats.spooled, stats.delivered, stats.pendingBatches], [0, 3, 0]);
  await r.close();
});

test("a refused or failed answer is retried under the same key until it is stored", async () => {
  const collector = new FakeCollector(served(10));
  collector.plan = ["503", "down", "html", "429", ""];
  const [r] = reporter(collector);
  assert.equal(await r.report("colors", "green"), "spooled");
  assert.equal(await r.flush(10_000), true);
  assert.equal(collector.posts.length, 5);
  assert.equal(new Set(collector.posts.map((p) => p.key)).size, 1);
  assert.equal((await r.stats()).delivered, 1);
  await r.close();
});

test("413 splits the batch; the collector's own 4xx dead-letters it and says so", async () => {
  const collector = new FakeCollector(served(10));
  collector.plan = ["413"];
  const [r, errors] = reporter(collector, { batchSize: 4 });
  for (let i = 0; i < 4; i++) await r.report("colors", "red");
  assert.equal(await r.flush(5000), true);
  assert.deepEqual(collector.posts.map((p) => p.body.reports.length), [4, 2, 2]);
  collector.plan = ["400"];
  await r.report("colors", "red");
  assert.equal(await r.flush(5000), true);
  const stats = await r.stats();
  assert.deepEqual([stats.delivered, stats.deadLettered, stats.spooled], [4, 1, 0]);
  assert.match(stats.lastError ?? "", /400.*test: injected/);
  assert.deepEqual(errors.map((e) => [e.status, (e as DeliveryError).kind, (e as DeliveryError).httpStatus]), [["delivery", "reports_refused", 400]]);
  await r.close();
});

test("401 and 403: the reports wait authWait for a fixed token, told once, then dead letters", async () => {
  const collector = new FakeCollector(served(10));
  collector.plan = ["401", "401", "401", ...new Array<string>(1000).fill("403")];
  const [r, errors] = reporter(collector, { authWaitMs: 60_000 });
  await r.report("colors", "red");
  assert.equal(await r.flush(150), false); // retried, not delivered
  const waiting = await r.stats();
  assert.equal(waiting.awaitingToken, 1);
  assert.ok((waiting.awaitingTokenUntil ?? 0) > Date.now() / 1000 + 50);
  const told = errors.filter((e) => e instanceof DeliveryError);
  assert.ok(told.length >= 1 && told.every((e) => e.field === "token"));
  assert.ok(told.length <= 2, "told once per distinct answer (401, 403), not per retry");
  assert.ok(!told.some((e) => e.message.includes("token-1")), "the token is never in a message");
  collector.plan = []; // the collector learns the token
  assert.equal(await r.flush(5000), true);
  assert.deepEqual([(await r.stats()).delivered, (await r.stats()).awaitingToken], [1, 0]);
  await r.close();
  const [s, later] = reporter(collector, { authWaitMs: 1 });
  collector.plan = new Array(50).fill("401");
  await s.report("colors", "red");
  assert.equal(await s.flush(5000), true); // dead letters once authWait has passed
  assert.equal((await s.stats()).deadLettered, 1);
  assert.match(later.at(-1)?.message ?? "", /dead-lettered after waiting authWait/);
  await s.close();
});

test("redirects: followed within the collector's origin only, the body and key kept", async () => {
  const collector = new FakeCollector(served(10));
  collector.plan = ["redirect 307 http://collector.test/v2/reports", "redirect 308 /v3/reports"];
  const [r, errors] = reporter(collector);
  await r.report("colors", "red");
  assert.equal(await r.flush(5000), true);
  assert.deepEqual(collector.posts.map((p) => new URL(p.url).pathname), ["/v1/reports", "/v2/reports", "/v3/reports"]);
  assert.equal(new Set(collector.posts.map((p) => p.key)).size, 1);
  assert.equal(errors.length, 0);
  for (const fate of ["redirect 307 https://collector.test/v1/reports", "redirect 302 /v1/reports", "redirect 307 http://evil.test/x"]) {
    collector.posts = [];
    collector.plan = [fate];
    await r.report("colors", "red");
    assert.equal(await r.flush(5000), true); // retried, then delivered
    assert.equal(collector.posts.length, 2, fate); // never to the other origin, never as a GET
    assert.ok(collector.posts.every((p) => new URL(p.url).origin === "http://collector.test"));
    assert.equal(errors.at(-1)?.field, "collector_url");
    assert.equal((errors.at(-1) as DeliveryError).kind, "redirect_not_followed");
  }
  await r.close();
});

test("an answer that is not the collector's is retried: collectorUrl or a proxy is wrong", async () => {
  const collector = new FakeCollector(served(10));
  collector.plan = ["proxy404", "proxy404"];
  const [r, errors] = reporter(collector);
  await r.report("colors", "red");
  assert.equal(await r.flush(5000), true);
  assert.equal(collector.posts.length, 3);
  assert.deepEqual(errors.map((e) => (e as DeliveryError).kind), ["collector_url"]); // told once
  await r.close();
});

test("every request has one total deadline", async () => {
  const collector = new FakeCollector(served(10));
  collector.plan = ["hang"];
  const [r] = reporter(collector, { timeoutMs: 200 });
  await r.report("colors", "red");
  assert.equal(await r.flush(5000), true);
  assert.equal(collector.posts.length, 2);
  await r.close();
  collector.plan = ["hang"];
  const [s] = reporter(collector, { timeoutMs: 200 });
  await s.report("colors", "red");
  await s.flush(150);
  assert.match((await s.stats()).lastError ?? "", /no complete answer within the 0.2 s timeout/);
  await s.close(0);
});

test("report() resolves to a status, never rejects, and spools nothing on failure", async () => {
  const collector = new FakeCollector(served(2));
  const [r, errors] = reporter(collector);
  assert.equal(await r.report("colors", "purple"), "invalid_value");
  assert.equal(await r.report("colors", 3 as unknown as string), "invalid_value");
  assert.equal(await r.report("colors", "red", { level: "high" }), "invalid_level");
  assert.equal(await r.report("Not A Name", "red"), "unknown_campaign");
  assert.equal(await r.report("other", "red"), "unknown_campaign");
  assert.equal(await r.report(undefined as unknown as string, {} as unknown as string), "unknown_campaign");
  assert.equal(await r.report("colors", "red"), "spooled");
  assert.equal(await r.report("colors", "red"), "spooled");
  assert.equal(await r.report("colors", "red"), "budget_exhausted");
  assert.equal(errors.at(-1)?.field, "window_reports");
  const stats = await r.stats();
  assert.equal(stats.spooled, 2);
  assert.deepEqual(stats.notSpooled, { invalid_value: 2, invalid_level: 1, unknown_campaign: 3, budget_exhausted: 1 });
  await r.close(0);
  assert.equal(await r.report("colors", "red"), "closed");
  const [off] = reporter(collector, { enabled: false });
  assert.equal(await off.report("colors", "red"), "disabled");
});

test("offline with no config cached: campaign_unavailable, without a request until backoff", async () => {
  const collector = new FakeCollector(served(2));
  collector.down = true;
  const calls: number[] = [];
  const counting = collector.fetch;
  collector.fetch = async (input, init) => {
    calls.push(1);
    return counting(input, init);
  };
  const [again] = reporter(collector, { backoffBaseMs: 60_000, backoffCapMs: 60_000 });
  assert.equal(await again.report("colors", "red"), "campaign_unavailable");
  assert.equal(await again.report("colors", "red"), "campaign_unavailable");
  assert.equal(calls.length, 1);
  await again.close(0);
});

test("the install is its stateDir: its spool, keys and ledger survive the process", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ldptel-js-"));
  const collector = new FakeCollector(served(1));
  collector.plan = ["503"];
  const [first] = reporter(collector, { stateDir: dir, backoffBaseMs: 60_000, backoffCapMs: 60_000 });
  assert.equal(await first.report("colors", "blue"), "spooled");
  assert.equal(await first.flush(300), false); // 503, then a long backoff
  await first.close(0);
  const keyOfFirst = collector.posts[0]?.key;
  const [second] = reporter(collector, { stateDir: dir });
  assert.equal(await second.report("colors", "red"), "budget_exhausted"); // one per window
  assert.equal(await second.flush(5000), true);
  assert.equal(collector.posts.length, 2);
  assert.equal(collector.posts[1]?.key, keyOfFirst); // the same batch, the same key
  assert.equal((await second.stats()).delivered, 1);
  await second.close();
});

test("windows are the collector's clock (its Date), whatever the device clock says", async () => {
  const collector = new FakeCollector(served(1));
  collector.date = new Date(Date.UTC(2031, 0, 2, 12)).toUTCString(); // the collector: 2031
  const [r] = reporter(collector);
  assert.equal(await r.report("colors", "red"), "spooled");
  const spent = await r.privacySpent("colors");
  assert.equal(spent.windowReports, 1);
  assert.ok(Math.abs(spent.lifetimeEpsilon - 1) < 1e-12); // ln(p/q) of the served p, q
  assert.equal(await r.report("colors", "red"), "budget_exhausted");
  const promise = await r.guarantee("colors");
  assert.match(promise?.statement ?? "", /any two value histories: privacy loss <= epsilon 1 in any window and <= 1000/);
  await r.close();
});

test("live Reporters share one beforeExit listener, removed when the last one closes", async () => {
  const before = process.listenerCount("beforeExit");
  const made = Array.from({ length: 12 }, () => reporter(new FakeCollector(served(5)), { deliverOnExit: true })[0]);
  assert.equal(process.listenerCount("beforeExit"), before + 1); // 12 > 10: no MaxListeners warning
  for (const r of made.slice(1)) await r.close();
  assert.equal(process.listenerCount("beforeExit"), before + 1);
  await made[0]!.close();
  assert.equal(process.listenerCount("beforeExit"), before);
});
