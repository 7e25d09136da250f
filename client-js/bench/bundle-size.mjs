// The browser bundle of the package (esbuild: ESM, minified, every module the entry point
// reaches; node:* imports left out, as a browser bundler leaves them), raw and gzipped.
// Prints JSON. Run after `npm run build`: node bench/bundle-size.mjs
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const result = await build({
  entryPoints: [new URL("../dist/src/index.js", import.meta.url).pathname],
  bundle: true,
  minify: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  external: ["node:*"],
  write: false,
});
const code = result.outputFiles[0].contents;
process.stdout.write(JSON.stringify({ minified_bytes: code.length, gzipped_bytes: gzipSync(code, { level: 9 }).length }));
