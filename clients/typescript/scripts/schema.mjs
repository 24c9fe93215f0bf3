// Regenerates src/schema.ts from a running server's /openapi.json:
//   engram serve --port 8765 &   then   npm run schema -- http://127.0.0.1:8765
// test/schema.test.mjs says when the committed file is behind what the server's schema generates.
import { writeFile } from "node:fs/promises";
import { generate } from "./generate.mjs";

const base = process.argv[2] ?? "http://127.0.0.1:8765";
const response = await fetch(new URL("/openapi.json", base));
if (!response.ok) throw new Error(`GET /openapi.json: HTTP ${response.status}`);
await writeFile(new URL("../src/schema.ts", import.meta.url), await generate(await response.json()));
console.log("wrote src/schema.ts");
