"""reports.mutation_report: survivors first with their diff, equivalents apart, the score line."""

import io

from reports import mutation_report

CASE = "rmsnorm:M=17,N=257,dtype=float16,layout=transposed,values=normal,eps=1e-06,seed=1"


def mutant(name, status, **kw):
    detected = status in ("killed", "timeout", "crashed")
    return dict(op="rmsnorm", name=name, origin="generated", operator="mask_lt_to_le", location="kernels/rmsnorm.py:60",
                diff="-    mask = cols < N\n+    mask = cols <= N", description="d", status=status, detected=detected,
                killed_by={"check": "dx", "case_id": CASE, "repro": "r"} if detected else None, seconds=1.0, note=kw.get("note", ""))


def test_table_lists_survivors_first_with_their_diff_and_equivalents_apart():
    mutants = [mutant("a.killed", "killed"), mutant("b.survived", "survived"), mutant("c.equivalent", "equivalent", note="same function")]
    header = {"backend": "interpreter", "device": "CPU", "seed": 0, "versions": {}}
    report = mutation_report.build(header, mutants=mutants, score=0.5, min_score=1.0, sanity={}, kill_matrix={},
                                   minimal_cases=[], seconds=3.0)
    assert report["passed"] is False and report["counts"]["survived"] == 1 and report["origins"] == {"generated": 3}
    out = io.StringIO()
    mutation_report.print_mutation(report, path="x/mutation.json", file=out)
    text = out.getvalue()
    assert text.index("b.survived") < text.index("a.killed")
    assert "SURVIVED rmsnorm/b.survived" in text and "+    mask = cols <= N" in text
    assert "c.equivalent: same function" in text
    assert "FAIL score 0.5000" in text and "dx @" in text


def test_a_refused_campaign_says_why():
    header = {"backend": "interpreter", "device": "CPU", "seed": 0}
    report = mutation_report.build(header, mutants=[], score=None, min_score=1.0, sanity={}, kill_matrix={},
                                   minimal_cases=[], seconds=1.0, refused="the unmutated kernel fails")
    out = io.StringIO()
    mutation_report.print_mutation(report, path="p", file=out)
    assert report["passed"] is False and "refused to score" in out.getvalue() and "unmutated kernel fails" in out.getvalue()


def test_mutants_out_of_reach_are_listed_apart_with_what_a_case_would_need():
    # bug class: a real bug no case can reach counted as detected (a false 1.0) or dropped unseen
    apart = [{"name": "gen.dlogits.drop_int64_cast.2", "backends": ["cuda"], "description": "d",
              "out_of_reach": {"needs": "V > 2**27 classes", "reason": "the oracle's memory"}},
             {"name": "cat.race", "backends": ["cuda"], "description": "d"}]
    header = {"backend": "cuda", "device": "H200", "seed": 0, "not_observable_here": apart}
    report = mutation_report.build(header, mutants=[mutant("a.killed", "killed")], score=1.0, min_score=1.0, sanity={},
                                   kill_matrix={}, minimal_cases=[], seconds=1.0)
    out = io.StringIO()
    mutation_report.print_mutation(report, path="p", file=out)
    text = out.getvalue()
    assert "1 mutant(s) out of the cases' reach here" in text and "gen.dlogits.drop_int64_cast.2: needs V > 2**27" in text
    assert "1 mutant(s) detectable only on another backend" in text
    assert report["total"] == 1  # neither is scored


def test_op_and_mutant_names_are_printed_whole_in_a_log(tmp_path, monkeypatch):
    # bug class: a CI log whose table cuts or folds a mutant's name (it is the --select of its repro)
    monkeypatch.setenv("COLUMNS", "80")
    name = "gen.triton_fused_linear_cross_entropy_hybrid._flce_backward_kernel.mask_lt_to_le.12"
    survivor = dict(mutant(name, "survived"), op="fused_linear_cross_entropy")
    header = {"backend": "interpreter", "device": "CPU", "seed": 0, "versions": {}}
    report = mutation_report.build(header, mutants=[survivor], score=0.0, min_score=1.0, sanity={}, kill_matrix={},
                                   minimal_cases=[], seconds=1.0)
    with open(tmp_path / "log.txt", "w") as log:
        mutation_report.print_mutation(report, path="p", file=log)
    rows = [line for line in (tmp_path / "log.txt").read_text().splitlines() if line.startswith("│ survived")]
    assert len(rows) == 1 and name in rows[0] and "fused_linear_cross_entropy" in rows[0]
