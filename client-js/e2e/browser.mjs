// Opens e2e/page.html in Debian's headless Chromium (playwright-core; no browser download)
// and prints what the page saw; with mode=hide it then navigates away, so the page-hide
// delivery (fetch keepalive) sends the spool.
//   node e2e/browser.mjs <page url>
import { chromium } from "playwright-core";

const [pageUrl] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
});
try {
  const page = await browser.newPage();
  const console_ = [];
  page.on("console", (message) => console_.push(message.text()));
  page.on("pageerror", (error) => console_.push(`pageerror: ${error.message}`));
  await page.goto(pageUrl);
  await page.waitForFunction(() => window.done !== undefined, null, { timeout: 60_000 });
  const done = await page.evaluate(() => window.done);
  if (new URL(pageUrl).searchParams.get("mode") === "hide") await page.goto("about:blank");
  process.stdout.write(JSON.stringify({ ...done, console: console_ }));
} finally {
  await browser.close();
}
