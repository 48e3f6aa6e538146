"""Print the failing records of verify.json / mutation.json files, one line each, for a run log.

    python3 scripts/failures.py reports/out/gpu/*/verify.json reports/out/gpu/*/mutation.json
"""

import json
import sys

LIMIT = 60  # failing records shown per file


def main(paths: list[str]) -> None:
    for path in paths:
        try:
            data = json.load(open(path))
        except (OSError, ValueError) as exc:
            print(f"== {path}: unreadable ({exc})")
            continue
        if "kernels" in data:
            print(f"== {path}: passed={data['passed']} seconds={data.get('seconds')}")
            for k in data["kernels"]:
                print(f"   {k['name']}: {k['verdict']} cases={k['cases']} failed={k['failed']}")
            bad = [c for c in data["cases"] if not c["passed"] and not c.get("waived")]
            seen = set()
            for c in bad:
                key = (c["kernel"], c["check"], c["layout"])
                if key in seen or len(seen) >= LIMIT:
                    continue
                seen.add(key)
                msg = " | ".join(str(c.get("message") or "").splitlines()[:3])
                print(f"   FAIL {c['kernel']} {c['check']} {c['case_id']}: {msg[:500]}")
            print(f"   {len(bad)} failing records")
        elif "mutants" in data:
            print(f"== {path}: score={data.get('score')} passed={data.get('passed')} counts={data.get('counts')}"
                  f" seconds={data.get('seconds')}")
            sanity = data.get("sanity") or {}
            print(f"   sanity: {sanity.get('passed')} {sanity.get('reason')}")
            for m in data["mutants"]:
                if m["status"] == "survived":
                    print(f"   SURVIVED {m['name']} {m['location']}: {m['description']}")


if __name__ == "__main__":
    main(sys.argv[1:])
