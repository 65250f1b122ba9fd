"""Checks docs/ops against the code: run by .ci/ops-check.sh (which installs jsonschema and
PyYAML for it), from the repository's root.

- The Grafana dashboard parses, follows docs/ops/dashboard.schema.json, and its panels have
  unique ids, unique refIds within a panel, and places inside the 24-column grid that do not
  overlap.
- Every alerting rule has `for`, a `severity` label, and `summary` and `description`
  annotations.
- Every metric named in a dashboard expression or variable, an alert expression or an
  alert unit test's input series is one payd exports: a counter or gauge by its name, a
  histogram by its `_bucket`, `_sum` or `_count` series. `up` and `probe_success` (the
  scrape's and the blackbox exporter's) are allowed in the rules only.
- With --dashboard-rules-out, the dashboard's expressions are written out as recording rules
  (Grafana's variables filled in) for `promtool check rules` to parse.

The exported names are read from the `counter!`, `gauge!` and `histogram!` calls in src/ and
actors/, a name given as a constant (`metrics::gauge!(ACTORS_LIVE, …)`) resolved through its
`const … : &str = "…"`. A call whose name cannot be read fails the check rather than being
skipped.
"""

import argparse
import json
import pathlib
import re
import sys

import jsonschema
import yaml

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
RULE_ONLY_METRICS = {"up", "probe_success"}
SEVERITIES = {"critical", "warning", "info"}

RECORDING_MACRO = re.compile(
    r"(?<![\w:])(?:metrics::)?(counter|gauge|histogram)!\s*\(\s*"
    r"(?:\"(?P<literal>[^\"]*)\"|(?P<ident>[A-Za-z_][A-Za-z0-9_:]*))"
)
STR_CONST = re.compile(
    r"\bconst\s+([A-Z][A-Z0-9_]*)\s*:\s*&\s*(?:'static\s+)?str\s*=\s*\"([^\"]*)\""
)
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def fail(problems):
    for p in problems:
        print(f"  {p}", file=sys.stderr)
    sys.exit(1)


# ------------------------------------------------------------------ what payd exports


def code_lines(path):
    """The file's text without its comment lines (doc comments mention macros too)."""
    return "\n".join(
        line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")
    )


def exported_metrics(roots):
    """{name: kind} of every metric the code records, kind one of counter, gauge, histogram."""
    files = sorted(p for root in roots for p in pathlib.Path(root).rglob("*.rs"))
    if not files:
        fail([f"no Rust sources under {', '.join(roots)}"])
    texts = {p: code_lines(p) for p in files}
    global_consts = {}
    for text in texts.values():
        for name, value in STR_CONST.findall(text):
            global_consts.setdefault(name, set()).add(value)
    found, problems = {}, []
    for path, text in texts.items():
        local_consts = dict(STR_CONST.findall(text))
        for m in RECORDING_MACRO.finditer(text):
            kind = m.group(1)
            where = f"{path}:{text.count(chr(10), 0, m.start()) + 1}"
            if m.group("literal") is not None:
                name = m.group("literal")
            else:
                ident = m.group("ident").rsplit("::", 1)[-1]
                if ident in local_consts:
                    name = local_consts[ident]
                elif len(global_consts.get(ident, ())) == 1:
                    name = next(iter(global_consts[ident]))
                else:
                    problems.append(f"{where}: {kind}!({ident}, …): cannot tell the metric's name")
                    continue
            if not METRIC_NAME.match(name):
                problems.append(f"{where}: {kind}!(\"{name}\"): not a metric name")
                continue
            if found.setdefault(name, kind) != kind:
                problems.append(f"{where}: {name} recorded as {kind} and as {found[name]}")
    if problems:
        fail(["cannot read the exported metrics:"] + problems)
    return found


def series_names(exported):
    """The series names Prometheus can query, from the families payd exports."""
    names = set()
    for name, kind in exported.items():
        if kind == "histogram":
            names.update(name + s for s in HISTOGRAM_SUFFIXES)
        else:
            names.add(name)
    return names


# ------------------------------------------------------------------ metric names in PromQL

KEYWORDS = {
    "and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
    "group_left", "group_right", "inf", "nan",
}


def promql_metrics(expr):
    """The metric names an expression selects: every identifier that is not a function,
    a keyword, a label name, a string, a duration or a Grafana variable."""
    names = set(re.findall(r"__name__\s*=\s*\"([^\"]+)\"", expr))
    s = re.sub(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|`[^`]*`", '""', expr)
    s = re.sub(r"\{[^{}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\[\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    for m in re.finditer(r"(?<![\w:$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])", s):
        token = m.group(1)
        if s[m.end():].lstrip().startswith("("):
            continue  # a function or an aggregation
        if token.lower() in KEYWORDS:
            continue
        names.add(token)
    return names


def grafana_query_metrics(query):
    """Metric names of a Prometheus template variable's query."""
    q = query.strip()
    m = re.fullmatch(r"label_values\(\s*(.*?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)", q, re.S)
    if m:
        return promql_metrics(m.group(1))
    if re.fullmatch(r"label_values\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\)|label_names\(.*\)", q, re.S):
        return set()
    m = re.fullmatch(r"query_result\((.*)\)", q, re.S)
    if m:
        return promql_metrics(m.group(1))
    m = re.fullmatch(r"metrics\((.*)\)", q, re.S)
    if m:
        return set()
    return promql_metrics(q)


def self_test():
    cases = {
        'histogram_quantile(0.99, sum by (route, le) (rate(payd_x_seconds_bucket'
        '{job=~"$job", route!="/metrics"}[$__rate_interval])))': {"payd_x_seconds_bucket"},
        "sum without (instance) (increase(a_total[5m] offset 1h)) > bool 2e3": {"a_total"},
        'b / on (job) group_left (version) c{x="y(z)"} unless up == 0': {"b", "c", "up"},
        'max_over_time(d[10m:1m]) or vector(0) and {__name__="e"}': {"d", "e"},
        "topk(10, sum by (kind) (f:recorded:rate5m))": {"f:recorded:rate5m"},
    }
    for expr, want in cases.items():
        got = promql_metrics(expr)
        assert got == want, f"promql_metrics({expr!r}) = {got}, not {want}"
    assert grafana_query_metrics('label_values(g{job=~"$job"}, instance)') == {"g"}
    assert grafana_query_metrics("label_values(job)") == set()


# ------------------------------------------------------------------ the dashboard


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def check_dashboard(path, schema_path, series):
    problems = []
    try:
        dashboard = json.loads(pathlib.Path(path).read_text())
    except json.JSONDecodeError as e:
        fail([f"{path}: not JSON: {e}"])
    schema = json.loads(pathlib.Path(schema_path).read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(dashboard), key=lambda e: list(e.path))
    for e in errors:
        at = "/".join(str(p) for p in e.absolute_path) or "(root)"
        problems.append(f"{path}: {at}: {e.message}")
    if problems:
        fail(problems)

    panels = list(all_panels(dashboard["panels"]))
    rows = sum(1 for p in panels if p["type"] == "row")
    ids = [p["id"] for p in panels]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"{path}: panel id {dup} is used more than once")
    cells = {}
    for p in panels:
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            problems.append(f"{path}: panel {p['title']!r} goes past the grid's 24 columns")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                other = cells.setdefault((x, y), p["title"])
                if other != p["title"]:
                    problems.append(f"{path}: panels {other!r} and {p['title']!r} overlap")
                    break
            else:
                continue
            break

    used = {}
    exprs = 0
    for p in panels:
        refs = [t["refId"] for t in p.get("targets", [])]
        if len(refs) != len(set(refs)):
            problems.append(f"{path}: panel {p['title']!r} repeats a refId")
        for t in p.get("targets", []):
            exprs += 1
            for name in promql_metrics(t["expr"]):
                used.setdefault(name, set()).add(f"panel {p['title']!r}")
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        q = var.get("query")
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        for name in grafana_query_metrics(q):
            used.setdefault(name, set()).add(f"variable ${var['name']}")
    for name in sorted(set(used) - series):
        problems.append(
            f"{path}: {name} (in {', '.join(sorted(used[name]))}) is not a metric payd exports"
        )
    if problems:
        fail(problems)
    return f"{len(panels) - rows} panels in {rows} rows", exprs, set(used)


def grafana_to_promql(expr):
    """A dashboard expression with Grafana's variables filled in, for promtool to parse:
    intervals become 5m, the other variables (used inside label matchers) `.*`."""
    expr = re.sub(r"\$\{?__(?:rate_interval|interval|range)\}?", "5m", expr)
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*(?::[a-z]+)?\}?", ".*", expr)


def write_dashboard_rules(dashboard_path, out):
    """Every dashboard expression as a recording rule, so `promtool check rules` parses it."""
    dashboard = json.loads(pathlib.Path(dashboard_path).read_text())
    rules = []
    for p in all_panels(dashboard["panels"]):
        for t in p.get("targets", []):
            rules.append({"record": f"dashboard:panel_{p['id']}:{t['refId']}",
                          "expr": grafana_to_promql(t["expr"])})
    pathlib.Path(out).write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))


# ------------------------------------------------------------------ the alerting rules


def check_rules(path, test_path, series):
    problems = []
    doc = yaml.safe_load(pathlib.Path(path).read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("groups"), list):
        fail([f"{path}: not a Prometheus rule file (a mapping with a list of groups)"])
    used, alerts = {}, 0
    allowed = series | RULE_ONLY_METRICS
    for group in doc.get("groups") or []:
        for rule in group.get("rules") or []:
            name = rule.get("alert") or rule.get("record") or "?"
            if "alert" in rule:
                alerts += 1
                if not rule.get("for"):
                    problems.append(f"{path}: {name} has no `for`")
                severity = (rule.get("labels") or {}).get("severity")
                if severity not in SEVERITIES:
                    problems.append(
                        f"{path}: {name}: severity {severity!r} is not one of {sorted(SEVERITIES)}"
                    )
                annotations = rule.get("annotations") or {}
                for key in ("summary", "description"):
                    if not str(annotations.get(key, "")).strip():
                        problems.append(f"{path}: {name} has no {key} annotation")
            for metric in promql_metrics(str(rule.get("expr", ""))):
                used.setdefault(metric, set()).add(name)
    if alerts == 0:
        problems.append(f"{path}: no alerting rule found")
    for metric in sorted(set(used) - allowed):
        problems.append(
            f"{path}: {metric} (in {', '.join(sorted(used[metric]))}) is not a metric payd exports"
        )

    tests = yaml.safe_load(pathlib.Path(test_path).read_text())
    if not isinstance(tests, dict) or not tests.get("tests"):
        problems.append(f"{test_path}: no rule unit tests")
        tests = {}
    for case in tests.get("tests") or []:
        for s in case.get("input_series") or []:
            for metric in promql_metrics(s["series"]):
                if metric not in allowed:
                    problems.append(
                        f"{test_path}: input series {s['series']!r}: "
                        f"{metric} is not a metric payd exports"
                    )
    if problems:
        fail(problems)
    return alerts, set(used)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sources", nargs="+", default=["src", "actors"])
    ap.add_argument("--dashboard", default="docs/ops/grafana-dashboard.json")
    ap.add_argument("--schema", default="docs/ops/dashboard.schema.json")
    ap.add_argument("--rules", default="docs/ops/alerts.yml")
    ap.add_argument("--rule-tests", default="docs/ops/alerts.test.yml")
    ap.add_argument("--dashboard-rules-out", metavar="PATH",
                    help="also write the dashboard's expressions there as recording rules")
    args = ap.parse_args()

    self_test()
    exported = exported_metrics(args.sources)
    series = series_names(exported)
    print(f"payd exports {len(exported)} metric families:")
    for name in sorted(exported):
        print(f"  {name} ({exported[name]})")

    panels, exprs, dash_used = check_dashboard(args.dashboard, args.schema, series)
    print(
        f"{args.dashboard}: valid against {args.schema}; {panels}, {exprs} expressions, "
        f"{len(dash_used)} metric names, all exported:"
    )
    print(f"  {', '.join(sorted(dash_used))}")
    alerts, rule_used = check_rules(args.rules, args.rule_tests, series)
    print(
        f"{args.rules}: {alerts} alerts, each with for, severity, summary and description; "
        f"metrics {', '.join(sorted(rule_used))}: exported (or up/probe_success)"
    )
    if args.dashboard_rules_out:
        write_dashboard_rules(args.dashboard, args.dashboard_rules_out)
    shown = {n for n in exported if series_names({n: exported[n]}) & dash_used}
    unused = sorted(set(exported) - shown)
    if unused:
        print(f"note: exported but on no panel: {', '.join(unused)}")


if __name__ == "__main__":
    main()
