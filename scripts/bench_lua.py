"""The wrk scripts of ``make bench``: one fixed request, a fresh DPoP proof per request, or a
task poll cycling through many handles (a caller's polls of one task have their own budget)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["advance_proofs", "write_lua", "write_task_lua"]


LUA = """wrk.method = "POST"
wrk.body = [[{body}]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
{headers}
"""


def write_lua(
    path: Path,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    proofs: Path | None = None,
) -> Path:
    """A wrk script; ``proofs``: a file of DPoP proofs, one a line, each sent once (RFC 9449
    §11.1: the gateway refuses a replay): wrk's two threads take alternate lines from the one
    in ``<proofs>.start``, which :func:`advance_proofs` moves past what a run used."""
    lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    script = LUA.format(body=json.dumps(body, separators=(",", ":")), headers=lines)
    if proofs is not None:
        Path(f"{proofs}.start").write_text("0\n")
        path.with_name(path.name + ".proofs").write_text(str(proofs))
        script += DPOP_LUA.replace("PROOFS", str(proofs))
    path.write_text(script)
    return path


def advance_proofs(lua: Path, requests: int, connections: int) -> None:
    """After a run of ``lua``: start the next one past every proof this one may have sent (the
    threads alternate, so the busier one reached at most twice the total)."""
    start = lua.with_name(lua.name + ".proofs")
    if start.exists():
        proofs = Path(start.read_text().strip() + ".start")
        used = 2 * (requests + connections) + 4
        proofs.write_text(f"{int(proofs.read_text()) + used}\n")


DPOP_LUA = """
local threads = 0
function setup(thread)
  thread:set("offset", threads)
  threads = threads + 1
end
function init(args)
  proofs = {}
  for line in io.lines("PROOFS") do proofs[#proofs + 1] = line end
  local f = io.open("PROOFS.start")
  next_proof = tonumber(f:read("*l")) + offset
  f:close()
end
function request()
  next_proof = next_proof + 2
  wrk.headers["DPoP"] = proofs[(next_proof % #proofs) + 1]
  return wrk.format()
end
"""


TASK_LUA = """
local threads = 0
function setup(thread)
  thread:set("offset", threads)
  threads = threads + 1
end
function init(args)
  handles = {}
  for line in io.lines("HANDLES") do handles[#handles + 1] = line end
  next_handle = offset
end
function request()
  next_handle = next_handle + 2
  local handle = handles[(next_handle % #handles) + 1]
  wrk.headers["Mcp-Name"] = handle
  return wrk.format(nil, nil, nil, string.format(BODY, handle))
end
"""


def write_task_lua(
    path: Path, body: Mapping[str, Any], headers: Mapping[str, str], handles: Sequence[str]
) -> Path:
    """A wrk script polling ``tasks/get`` with ``handles`` in turn (each request's body and
    ``Mcp-Name`` carry the next one): ``body`` with ``params.taskId`` set to ``"%s"``."""
    listed = path.with_name(path.name + ".handles")
    listed.write_text("".join(f"{handle}\n" for handle in handles))
    text = json.dumps(body, separators=(",", ":")).replace("%", "%%").replace('"%%s"', '"%s"')
    script = LUA.format(
        body=text, headers="\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
    )
    script += TASK_LUA.replace("HANDLES", str(listed)).replace("BODY", "[[" + text + "]]")
    path.write_text(script)
    return path
