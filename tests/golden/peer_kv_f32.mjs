// Runs ../shared/peer/llamacpp.mjs with llama.cpp's KV cache in f32 instead of f16, so that
// goldens reflect llama.cpp's weights and matrix products without the rounding of its half-
// precision cache (which differs between its own attention paths by more than the tolerances of
// the tests). Usage: node tests/golden/peer_kv_f32.mjs [llamacpp.mjs options]
import path from "node:path";
import os from "node:os";
import {pathToFileURL, fileURLToPath} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const peer = process.env.LLM_PEER_SCRIPT ?? path.join(here, "..", "..", "..", "shared", "peer", "llamacpp.mjs");
const nlcDir = process.env.NODE_LLAMA_CPP_DIR ?? path.join(process.env.LLM_PEER_DIR ?? path.join(os.homedir(), ".cache", "llm-peer"), "node_modules", "node-llama-cpp");
const nlc = await import(pathToFileURL(path.join(nlcDir, "dist/index.js")).href);
const create = nlc.LlamaModel.prototype.createContext;
nlc.LlamaModel.prototype.createContext = function (options = {}) {
    return create.call(this, {...options, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
};
await import(pathToFileURL(peer).href);
