// report() cost in Node (benchmarks/client_js.py): a Reporter on a file stateDir whose
// campaigns' configs come from a scripted collector (no network), batches too large and
// old to be sent meanwhile, so only the caller's work is timed: value check, ledger,
// memo, perturbation (CSPRNG), the journal write. Prints JSON rows.
//   node bench/report-cost.mjs <configs.json> <state dir> <calls>
import { readFileSync } from "node:fs";
import { Reporter } from "../dist/src/index.js";

const [configsFile, stateDir, callsText] = process.argv.slice(2);
const configs = JSON.parse(readFileSync(configsFile, "utf8"));
const calls = Number(callsText);
const WARM_UP = 500;
const served = new Map(configs.map((c) => [c.name, c]));
const fetch = async (input) => {
  const name = new URL(String(input)).pathname.split("/").pop();
  const headers = { Date: new Date().toUTCString(), "Content-Type": "application/json" };
  return new Response(JSON.stringify(served.get(name)), { status: 200, headers });
};

const rows = [];
for (const config of configs) {
  const reporter = new Reporter("http://bench.invalid", "bench-token", {
    stateDir: `${stateDir}/${config.name}`,
    fetch,
    batchSize: 10_000_000,
    maxBatchAgeMs: 3_600_000,
    maxSpoolRows: 10_000_000,
    deliverOnExit: false,
  });
  await reporter.privacySpent(config.name); // loads the config before timing
  const labels = config.domain;
  // Warm-up calls, untimed: the JIT compiles the path first (Python has no such phase).
  for (let i = 0; i < WARM_UP; i++) await reporter.report(config.name, labels[i % labels.length]);
  const walls = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const t0 = process.hrtime.bigint();
    const status = await reporter.report(config.name, labels[i % labels.length]);
    walls.push(Number(process.hrtime.bigint() - t0) / 1e3);
    if (status !== "spooled") throw new Error(`report: ${status}`);
  }
  const cpu = process.cpuUsage(cpu0);
  walls.sort((a, b) => a - b);
  rows.push({
    oracle: config.oracle,
    d: labels.length,
    median_us: walls[Math.floor(calls / 2)],
    mean_us: walls.reduce((s, w) => s + w, 0) / calls,
    p99_us: walls[Math.floor(0.99 * (calls - 1))],
    cpu_us: (cpu.user + cpu.system) / calls,
  });
  await reporter.close(0);
}
process.stdout.write(JSON.stringify(rows));
