// Many installs of one Node app, each with its own stateDir (its own identity, ledger and
// spool), each reporting one value once, then flushing: driven by
// tests/client_js/test_node_e2e.py against a real collector.
//   node e2e/installs.mjs <collector url> <token> <campaign> <state base dir> <value>...
import { Reporter } from "../dist/src/index.js";

const [url, token, campaign, base, ...values] = process.argv.slice(2);
/** Installs running at once: with all 150 at once, the test collector (werkzeug, a small
 * Redis pool) sometimes fails a first config GET, and that install's report() is then
 * "campaign_unavailable" (nothing cached yet: docs/client-js.md), not a lost report. */
const AT_ONCE = 10;

async function install(value, i) {
  const errors = [];
  const reporter = new Reporter(url, token, {
    stateDir: `${base}/install-${i}`,
    onError: (error) => errors.push(`${error.status} ${error.message}`),
  });
  const status = await reporter.report(campaign, value);
  const flushed = await reporter.flush(60_000);
  const stats = await reporter.stats();
  await reporter.close();
  return { status, flushed, delivered: stats.delivered, lastError: stats.lastError, errors };
}

const results = [];
for (let start = 0; start < values.length; start += AT_ONCE) {
  const slice = values.slice(start, start + AT_ONCE);
  results.push(...(await Promise.all(slice.map((value, j) => install(value, start + j)))));
}
process.stdout.write(JSON.stringify(results));
