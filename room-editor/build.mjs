// Builds grader/room/static/editor.js (CodeMirror 6, minified) and editor.LICENSE.txt (the
// licence of every npm package inside the bundle) from the versions pinned in package-lock.json.
// Run: npm ci && npm run build   (tests/test_room_bundle.py checks the committed files match)
import {build} from "esbuild";
import {existsSync, readFileSync, writeFileSync} from "node:fs";
import {dirname, join} from "node:path";
import {fileURLToPath} from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "grader", "room", "static");

const result = await build({
  entryPoints: [join(here, "src", "editor.js")], bundle: true, minify: true, format: "iife",
  target: "es2020", legalComments: "none", metafile: true, write: false, charset: "utf8",
  outfile: join(out, "editor.js"),
});
writeFileSync(join(out, "editor.js"), result.outputFiles[0].text);

// Every package that contributed a file, with its licence text, in a stable order.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) packages.add(m[1]);
}
const parts = ["Third-party code in editor.js, bundled from npm by room-editor/build.mjs.\n"];
for (const name of [...packages].sort()) {
  const folder = join(here, "node_modules", name);
  const meta = JSON.parse(readFileSync(join(folder, "package.json"), "utf8"));
  const file = ["LICENSE", "LICENSE.md", "LICENSE.txt"].map((f) => join(folder, f)).find(existsSync);
  if (!file) throw new Error(`${name} ships no LICENSE file`);
  parts.push(`== ${name} ${meta.version} (${meta.license}) ==\n\n${readFileSync(file, "utf8").trim()}\n`);
}
writeFileSync(join(out, "editor.LICENSE.txt"), parts.join("\n"));
console.log(`editor.js: ${result.outputFiles[0].contents.length} bytes, ${packages.size} packages`);
