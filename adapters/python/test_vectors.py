"""The test vectors (vectors/*.json) replayed against the Python store in Python's own test
framework, without the driver: how an implementation in any language uses them.

    python3 -m unittest adapters/python/test_vectors.py

Each case runs on a fresh store; each step's request goes to the store as it is, and its answer
is compared with `expect`: the `ok` value, or the error's kind and name. A request that no JSON
value writes as the driver sends it (a lone surrogate escape, `1e400`, `1e3`, `-0`) is its
`line` of text, read as the adapter reads a line.
"""

import json
import os
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import store  # noqa: E402  (the store beside this file)

VECTORS = pathlib.Path(os.environ.get("RESERVATION_VECTORS", pathlib.Path(__file__).parents[2] / "vectors"))


def answer(s, request):
    """What the adapter would answer, as the vectors write it."""
    try:
        return {"ok": s.run(request)}
    except store.Invalid as e:
        return {"error": {"kind": "InvalidArgument", "name": e.name}}


class Vectors(unittest.TestCase):
    def test_vector_files_exist(self):
        self.assertTrue(sorted(VECTORS.glob("*.json")), "no vector file in %s" % VECTORS)

    def test_every_vector(self):
        for path in sorted(VECTORS.glob("*.json")):
            cases = json.loads(path.read_text(encoding="utf-8"))["cases"]
            for case in cases:
                with self.subTest(file=path.name, check=case["check"], case=case["case"]):
                    s = store.Store()
                    last = "none yet"
                    for i, step in enumerate(case["steps"]):
                        request = step["request"] if "request" in step else json.loads(step["line"])
                        got = answer(s, request)
                        # A lookup has no rule of its own: it shows what the last operation did.
                        rule = step.get("rule") or "of the last operation: %s" % last
                        last = step.get("rule", last)
                        self.assertEqual(
                            got, step["expect"],
                            "step %d (rule %s): %s" % (i, rule, step.get("line") or json.dumps(request, ensure_ascii=False)),
                        )


if __name__ == "__main__":
    unittest.main()
