#!/usr/bin/env python3
"""An adapter of protocol 2, as adapters/python/store.py answered before protocol 3: its `hello`
answer `{"protocol": 2, "durable": …}`, with no `power_cuts`, exactly as that store wrote it (its
whole text is in the repository's history). The driver refuses it at `hello`, so nothing after
the answer is ever asked; it answers every other request as a store that is not open would.
"""

import json
import sys

DURABLE = "--durable" in sys.argv[1:]

for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    rid = request.get("id")
    if request.get("op") == "hello":
        reply = {"id": rid, "ok": {"protocol": 2, "durable": DURABLE}}
    else:
        reply = {"id": rid, "error": {"kind": "InvalidArgument", "name": "Unrepresentable", "message": "not open"}}
    sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
    sys.stdout.flush()
