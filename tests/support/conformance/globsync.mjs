// fs.globSync for Node 20 (the conformance CLI imports it; Node 22 has it): docs/protocol.md#conformance
import fs from "node:fs";
import path from "node:path";
export function globSync(pattern, options = {}) {
  const cwd = options.cwd ?? process.cwd();
  const re = new RegExp("^" + pattern.split("**/").map(p => p.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")).join("(?:.*/)?") + "$");
  const out = [];
  const walk = (dir) => { let entries; try { entries = fs.readdirSync(path.join(cwd, dir), { withFileTypes: true }); } catch { return; } for (const e of entries) { const rel = dir ? dir + "/" + e.name : e.name; if (e.isDirectory()) walk(rel); else if (re.test(rel)) out.push(rel); } };
  walk("");
  return out;
}
