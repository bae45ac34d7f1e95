#!/usr/bin/env python3
"""Offline checks of the Grafana dashboards and Prometheus alert rules in deploy/.

    check-observability.py selftest              the PromQL name extractor on fixed cases
    check-observability.py static                structure of dashboards, provisioning, rules
    check-observability.py metrics URL|FILE...   every metric name that a dashboard query or an
                                                 alert expression uses is exported by a node

`metrics` reads the OpenMetrics text of one or more running nodes (the union
counts: a family without samples is not printed at all by prometheus-client,
so several nodes that each did part of the work are scraped). Names listed in
deploy/grafana/pending-metrics.txt that no node exports yet are warnings, not
failures. Needs PyYAML (the bootstrap's venv has it).
"""

import glob
import json
import os
import re
import sys
import urllib.request

import yaml

DEPLOY = os.path.dirname(os.path.abspath(__file__))
DASHBOARDS = os.path.join(DEPLOY, "grafana", "dashboards")
PROVISIONING = os.path.join(DEPLOY, "grafana", "provisioning")
PENDING = os.path.join(DEPLOY, "grafana", "pending-metrics.txt")
PROMETHEUS = os.path.join(DEPLOY, "prometheus", "prometheus.yml")
RULES = os.path.join(DEPLOY, "prometheus", "rules")
COMPOSE = os.path.join(DEPLOY, "docker", "docker-compose.yml")

# Series that Prometheus itself makes (not scraped from a node).
PROMETHEUS_SERIES = {
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
    "ALERTS",
    "ALERTS_FOR_STATE",
}

FUNCTIONS = {
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
    "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
    "delta", "deriv", "double_exponential_smoothing", "exp", "floor", "histogram_avg",
    "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
    "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta", "increase", "info",
    "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
    "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi",
    "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
    "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc",
    "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh",
    "time", "timestamp", "vector", "year",
}
AGGREGATIONS = {
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk",
    "topk", "quantile", "limitk", "limit_ratio",
}
# Keywords followed by a parenthesised list of label names.
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "start", "end", "inf", "nan"}
# Grafana's template-variable query functions.
GRAFANA_FUNCTIONS = {"label_values", "label_names", "metrics", "query_result"}

TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>\#[^\n]*)
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
    | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?:ms|s|m|h|d|w|y)\d*)*)
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^=<>,(){}\[\]@])
    """,
    re.X,
)
# Grafana variables: $__rate_interval, ${job}, $instance, [[var]].
VARIABLE = re.compile(r"\$__\w+|\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")


class PromQLError(ValueError):
    pass


def tokens(expr):
    expr = VARIABLE.sub("", expr)
    out, pos = [], 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise PromQLError(f"unexpected {expr[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup not in ("space", "comment"):
            out.append((m.lastgroup, m.group()))
    depth = []
    for kind, text in out:
        if kind != "op":
            continue
        if text in ("(", "{", "["):
            depth.append(text)
        elif text in (")", "}", "]"):
            if not depth or {"(": ")", "{": "}", "[": "]"}[depth.pop()] != text:
                raise PromQLError(f"unbalanced {text!r}")
    if depth:
        raise PromQLError(f"unclosed {depth[-1]!r}")
    return out


def matching(toks, i):
    """Index of the bracket closing the one at toks[i]."""
    opening = toks[i][1]
    closing = {"(": ")", "{": "}", "[": "]"}[opening]
    level = 0
    for j in range(i, len(toks)):
        if toks[j][1] == opening:
            level += 1
        elif toks[j][1] == closing:
            level -= 1
            if level == 0:
                return j
    raise PromQLError(f"unclosed {opening!r}")


def metric_names(expr):
    """Metric names a PromQL expression (or a Grafana variable query) selects."""
    return names_in(tokens(expr))


def names_in(toks):
    names, i = set(), 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][1] if i + 1 < len(toks) else None
        if text == "{":
            end = matching(toks, i)
            inner = toks[i + 1:end]
            for k in range(len(inner) - 2):
                if inner[k] == ("ident", "__name__") and inner[k + 1][1] == "=":
                    names.add(inner[k + 2][1][1:-1])
            i = end + 1
        elif text == "[":
            i = matching(toks, i) + 1
        elif kind != "ident":
            i += 1
        elif text in LABEL_LISTS and following == "(":
            i = matching(toks, i + 1) + 1
        elif text in GRAFANA_FUNCTIONS and following == "(":
            end = matching(toks, i + 1)
            args, level, start = [], 0, i + 2
            for k in range(i + 2, end):
                if toks[k][1] in ("(", "{", "["):
                    level += 1
                elif toks[k][1] in (")", "}", "]"):
                    level -= 1
                if toks[k][1] == "," and level == 0:
                    args.append(toks[start:k])
                    start = k + 1
            args.append(toks[start:end])
            if text == "label_values" and len(args) == 2:
                names |= names_in(args[0])
            elif text in ("query_result",):
                names |= names_in(args[0])
            i = end + 1
        elif following == "(":
            if text not in FUNCTIONS and text not in AGGREGATIONS:
                raise PromQLError(f"unknown function {text}()")
            i += 1
        elif text in AGGREGATIONS and following in LABEL_LISTS:
            i += 1
        elif text.lower() in KEYWORDS or text in LABEL_LISTS:
            i += 1
        else:
            names.add(text)
            i += 1
    return names


SELFTEST = [
    ('sum by (instance, result) (rate(resolvd_replays_total{job=~"$job", result="operational"}[$__rate_interval]))',
     {"resolvd_replays_total"}),
    ("histogram_quantile(0.95, sum by (le) (rate(resolvd_dispute_to_settlement_seconds_bucket[5m])))",
     {"resolvd_dispute_to_settlement_seconds_bucket"}),
    ("max by (job, instance) (resolvd_rpc_endpoint_head) - on (job, instance) group_right resolvd_rpc_endpoint_head > 10",
     {"resolvd_rpc_endpoint_head"}),
    ("resolvd_account_balance_wei < 5 * resolvd_account_gas_cap_wei", {"resolvd_account_balance_wei", "resolvd_account_gas_cap_wei"}),
    ("x offset 10m or y @ 1609746000 unless z[5m:1m] and bool w", {"x", "y", "z", "w"}),
    ('{__name__="resolvd_peers", instance="a"} == 0', {"resolvd_peers"}),
    ('count(ALERTS{alertstate="firing"}) or vector(0)', {"ALERTS"}),
    ('label_values(resolvd_peers{job=~"$job"}, instance)', {"resolvd_peers"}),
    ("label_values(job)", set()),
    ('sum without (endpoint) (resolvd_rpc_endpoint_up) # a comment naming not_a_metric', {"resolvd_rpc_endpoint_up"}),
    ('topk(3, sum by (topic)(increase(resolvd_gossip_messages_total{result="reject"}[1h])))', {"resolvd_gossip_messages_total"}),
    ("resolvd_x / 1e18 > Inf", {"resolvd_x"}),
]
SELFTEST_ERRORS = ["rate(resolvd_replays_total[5m]", "sum(resolvd_peers))", "ratee(resolvd_peers[5m])", 'a{b="c}']


def selftest():
    for expr, want in SELFTEST:
        got = metric_names(expr)
        assert got == want, f"selftest: {expr!r}: {sorted(got)} != {sorted(want)}"
    for expr in SELFTEST_ERRORS:
        try:
            metric_names(expr)
        except PromQLError:
            continue
        raise AssertionError(f"selftest: {expr!r} should not parse")
    print(f"PromQL name extraction: {len(SELFTEST)} cases and {len(SELFTEST_ERRORS)} syntax errors as expected")


# ------------------------------------------------------------------ files

def fail(errors):
    for e in errors:
        print(f"  {e}", file=sys.stderr)
    sys.exit(1)


def panels_of(dashboard):
    for p in dashboard.get("panels", []):
        yield p
        yield from p.get("panels", [])  # a collapsed row holds its panels


def dashboards():
    files = sorted(glob.glob(os.path.join(DASHBOARDS, "*.json")))
    assert files, f"no dashboard in {DASHBOARDS}"
    return [(f, json.load(open(f))) for f in files]


def rule_files():
    files = sorted(glob.glob(os.path.join(RULES, "*.yml")))
    assert files, f"no rule file in {RULES}"
    return [(f, yaml.safe_load(open(f))) for f in files]


def queries():
    """(where, expression) of every dashboard query, variable query and alert expression."""
    out = []
    for path, d in dashboards():
        name = os.path.basename(path)
        for v in d.get("templating", {}).get("list", []):
            if v.get("type") == "query":
                q = v.get("query")
                q = q.get("query") if isinstance(q, dict) else q
                out.append((f"{name} variable {v['name']}", q))
        for p in panels_of(d):
            for t in p.get("targets", []):
                out.append((f"{name} panel {p.get('id')} {p.get('title')!r} {t.get('refId')}", t.get("expr", "")))
    for path, doc in rule_files():
        for g in doc["groups"]:
            for r in g["rules"]:
                out.append((f"{os.path.basename(path)} {r.get('alert') or r.get('record')}", r["expr"]))
    return out


DURATION = re.compile(r"^((\d+)(ms|s|m|h|d|w|y))+$")


def static():
    errors = []
    err = errors.append

    # Provisioning: the datasource and the dashboard provider.
    ds_doc = yaml.safe_load(open(os.path.join(PROVISIONING, "datasources", "prometheus.yml")))
    if ds_doc.get("apiVersion") != 1:
        err("datasource provisioning: apiVersion 1")
    datasources = ds_doc.get("datasources") or []
    ds_uids = [d.get("uid") for d in datasources]
    if len(set(ds_uids)) != len(ds_uids) or None in ds_uids:
        err(f"datasource provisioning: uids missing or not unique: {ds_uids}")
    for d in datasources:
        for key in ("name", "type", "url", "access"):
            if not d.get(key):
                err(f"datasource {d.get('uid')}: no {key}")
    prom_uids = {d["uid"] for d in datasources if d.get("type") == "prometheus"}
    if not prom_uids:
        err("datasource provisioning: no prometheus datasource")
    prov = yaml.safe_load(open(os.path.join(PROVISIONING, "dashboards", "resolvd.yml")))
    providers = prov.get("providers") or []
    if prov.get("apiVersion") != 1 or not providers:
        err("dashboard provisioning: apiVersion 1 and a provider")
    provider_paths = {p.get("options", {}).get("path") for p in providers}

    # The compose file mounts what the provisioning files point at.
    compose = yaml.safe_load(open(COMPOSE))
    services = compose["services"]
    mounts = {}
    for name in ("prometheus", "grafana"):
        svc = services.get(name)
        if not svc:
            err(f"compose: no {name} service")
            continue
        image = svc.get("image", "")
        if ":" not in image or image.endswith(":latest"):
            err(f"compose {name}: image {image!r} is not pinned to a version")
        for v in svc.get("volumes", []):
            src, dst = v.split(":")[:2]
            mounts[(name, os.path.normpath(os.path.join(DEPLOY, "docker", src)))] = dst
    def mounted(service, local):
        return mounts.get((service, os.path.normpath(local)))
    if mounted("grafana", PROVISIONING) != "/etc/grafana/provisioning":
        err("compose grafana: deploy/grafana/provisioning is not mounted on /etc/grafana/provisioning")
    dash_dst = mounted("grafana", DASHBOARDS)
    if dash_dst not in provider_paths:
        err(f"compose grafana: the dashboards are mounted on {dash_dst}, the provider reads {provider_paths}")
    prom_dir = mounted("prometheus", os.path.dirname(PROMETHEUS))
    cmd = services.get("prometheus", {}).get("command", [])
    if not prom_dir or f"--config.file={prom_dir}/prometheus.yml" not in cmd:
        err(f"compose prometheus: --config.file is not the mounted deploy/prometheus/prometheus.yml ({cmd})")
    for d in datasources:
        host = re.sub(r"^https?://([^:/]+).*", r"\1", d.get("url", ""))
        if host not in services:
            err(f"datasource {d.get('uid')}: {d.get('url')} is no compose service")

    # Prometheus configuration: the rules it loads and the nodes it scrapes.
    prom = yaml.safe_load(open(PROMETHEUS))
    loaded = set()
    for pattern in prom.get("rule_files", []):
        if os.path.isabs(pattern):
            err(f"prometheus.yml: rule file {pattern} should be relative to the config file")
        loaded |= {os.path.normpath(f) for f in glob.glob(os.path.join(os.path.dirname(PROMETHEUS), pattern))}
    for path, _ in rule_files():
        if os.path.normpath(path) not in loaded:
            err(f"prometheus.yml: rule_files does not load {os.path.relpath(path, DEPLOY)}")
    nodes = {n for n in services if n.startswith("node")}
    scraped = set()
    for job in prom.get("scrape_configs", []):
        if job.get("metrics_path", "/metrics") != "/metrics":
            err(f"prometheus.yml job {job.get('job_name')}: resolvd serves /metrics")
        for sc in job.get("static_configs", []):
            for t in sc.get("targets", []):
                host, _, port = t.partition(":")
                scraped.add(host)
                if host in nodes and port != "9500":
                    err(f"prometheus.yml: {t}: the nodes' API (metrics) port is 9500")
    if nodes - scraped:
        err(f"prometheus.yml: compose nodes not scraped: {sorted(nodes - scraped)}")

    # Dashboards.
    seen_uids = {}
    for path, d in dashboards():
        name = os.path.basename(path)
        for key in ("uid", "title", "panels", "schemaVersion", "templating"):
            if key not in d:
                err(f"{name}: no {key}")
        if d.get("uid") in seen_uids:
            err(f"{name}: uid {d.get('uid')} already used by {seen_uids[d['uid']]}")
        seen_uids[d.get("uid")] = name
        if len(d.get("uid", "")) > 40:
            err(f"{name}: uid longer than 40 characters")
        variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
        ds_vars = {n for n, v in variables.items() if v.get("type") == "datasource" and v.get("query") == "prometheus"}

        def datasource_ok(ds, where):
            if not isinstance(ds, dict) or ds.get("type") != "prometheus":
                err(f"{where}: datasource {ds!r} is not a prometheus datasource")
                return
            uid = ds.get("uid", "")
            var = re.fullmatch(r"\$\{(\w+)\}|\$(\w+)", uid)
            if var:
                if (var.group(1) or var.group(2)) not in ds_vars:
                    err(f"{where}: datasource variable {uid} is not defined")
            elif uid not in prom_uids:
                err(f"{where}: datasource uid {uid!r} is not provisioned")

        for v in variables.values():
            if v.get("type") == "query":
                datasource_ok(v.get("datasource"), f"{name} variable {v['name']}")
        ids = []
        for p in panels_of(d):
            where = f"{name} panel {p.get('id')} {p.get('title')!r}"
            ids.append(p.get("id"))
            if not p.get("title"):
                err(f"{where}: no title")
            g = p.get("gridPos", {})
            if not all(isinstance(g.get(k), int) for k in "hwxy") or g["x"] + g["w"] > 24:
                err(f"{where}: gridPos {g} is not within 24 columns")
            if p.get("type") == "row":
                continue
            datasource_ok(p.get("datasource"), where)
            targets = p.get("targets") or []
            if not targets:
                err(f"{where}: no targets")
            refs = [t.get("refId") for t in targets]
            if None in refs or len(set(refs)) != len(refs):
                err(f"{where}: refIds missing or not unique: {refs}")
            for t in targets:
                datasource_ok(t.get("datasource"), f"{where} {t.get('refId')}")
                if not (t.get("expr") or "").strip():
                    err(f"{where} {t.get('refId')}: empty expr")
        if None in ids or len(set(ids)) != len(ids):
            err(f"{name}: panel ids missing or not unique")
        # Panels overlapping on the grid.
        cells = {}
        for p in panels_of(d):
            g = p.get("gridPos", {})
            for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
                for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                    if (x, y) in cells and p.get("type") != "row":
                        err(f"{name}: panels {cells[(x, y)]} and {p.get('id')} overlap at {x},{y}")
                        break
                    cells[(x, y)] = p.get("id")
                else:
                    continue
                break

    # Alert rules (what `promtool check rules` checks, minus a full PromQL parser).
    alerts = {}
    rule_keys = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
    for path, doc in rule_files():
        name = os.path.basename(path)
        if not isinstance(doc, dict) or set(doc) != {"groups"}:
            err(f"{name}: a rule file has exactly one key, groups")
            continue
        groups = [g.get("name") for g in doc["groups"]]
        if None in groups or len(set(groups)) != len(groups):
            err(f"{name}: group names missing or not unique: {groups}")
        for g in doc["groups"]:
            extra = set(g) - {"name", "interval", "rules", "limit", "labels", "query_offset"}
            if extra:
                err(f"{name} group {g.get('name')}: unknown keys {sorted(extra)}")
            if not g.get("rules"):
                err(f"{name} group {g.get('name')}: no rules")
            for r in g.get("rules") or []:
                rname = r.get("alert") or r.get("record")
                where = f"{name} {rname}"
                if set(r) - rule_keys:
                    err(f"{where}: unknown keys {sorted(set(r) - rule_keys)}")
                if ("alert" in r) == ("record" in r):
                    err(f"{where}: exactly one of alert and record")
                if not isinstance(r.get("expr"), str) or not r["expr"].strip():
                    err(f"{where}: no expr")
                    continue
                try:
                    metric_names(r["expr"])
                except PromQLError as e:
                    err(f"{where}: expr: {e}")
                for key in ("for", "keep_firing_for"):
                    if key in r and not DURATION.match(str(r[key])):
                        err(f"{where}: {key} {r[key]!r} is not a duration")
                if "alert" in r:
                    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", r["alert"]):
                        err(f"{where}: alert name")
                    if r["alert"] in alerts:
                        err(f"{where}: alert name also in {alerts[r['alert']]}")
                    alerts[r["alert"]] = name
                    labels, ann = r.get("labels") or {}, r.get("annotations") or {}
                    if labels.get("severity") not in ("critical", "warning", "info"):
                        err(f"{where}: severity label critical, warning or info")
                    if not all(isinstance(v, str) for v in list(labels.values()) + list(ann.values())):
                        err(f"{where}: label and annotation values are strings")
                    for key in ("summary", "description"):
                        if not ann.get(key):
                            err(f"{where}: no {key} annotation")
                    for text in ann.values():
                        if text.count("{{") != text.count("}}"):
                            err(f"{where}: unbalanced template in {text!r}")

    for where, expr in queries():
        try:
            metric_names(expr)
        except PromQLError as e:
            err(f"{where}: {e}: {expr}")
    if errors:
        print("dashboards/alerts: structure errors:", file=sys.stderr)
        fail(errors)
    n_panels = sum(1 for _, d in dashboards() for p in panels_of(d) if p.get("type") != "row")
    print(f"{len(seen_uids)} dashboard(s), {n_panels} panels, {len(alerts)} alerts: structure OK")


# ------------------------------------------------------------------ metrics

SUFFIXES = {
    "counter": ["_total"],
    "histogram": ["_bucket", "_sum", "_count"],
    "gaugehistogram": ["_bucket", "_gsum", "_gcount"],
    "summary": ["", "_sum", "_count"],
    "info": ["_info"],
}
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{|\s)")


def exported(text):
    """Series names in an OpenMetrics/Prometheus text exposition."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(None, 3)
            names |= {family + s for s in SUFFIXES.get(kind.strip(), [""])}
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            if m:
                names.add(m.group(1))
    return names


def metrics(sources):
    have = set()
    for s in sources:
        if s.startswith("http://") or s.startswith("https://"):
            with urllib.request.urlopen(s, timeout=10) as resp:
                text = resp.read().decode()
        else:
            text = open(s).read()
        have |= exported(text)
    if not any(n.startswith("resolvd_") for n in have):
        fail([f"no resolvd_ metric in {sources}"])
    pending = set()
    for line in open(PENDING):
        line = line.split("#", 1)[0].strip()
        if line:
            pending.add(line)
    used = {}
    for where, expr in queries():
        for n in metric_names(expr):
            used.setdefault(n, []).append(where)
    unknown, waiting = [], []
    for n in sorted(used):
        if n in have or n in PROMETHEUS_SERIES:
            continue
        (waiting if n in pending else unknown).append(n)
    for n in sorted(pending - set(used)):
        print(f"warning: {n} is in pending-metrics.txt but no query uses it")
    for n in sorted(pending & have):
        print(f"warning: {n} is exported now: remove it from pending-metrics.txt")
    for n in waiting:
        print(f"warning: {n} is not exported yet (pending-metrics.txt), used by {len(used[n])} queries")
    if unknown:
        print("metric names that no node exports (and not in pending-metrics.txt):", file=sys.stderr)
        fail([f"{n}: {'; '.join(used[n])}" for n in unknown])
    print(f"{len(used)} metric names used; {len(used) - len(waiting)} exported by the node or made by "
          f"Prometheus, {len(waiting)} pending")


if __name__ == "__main__":
    cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "selftest":
        selftest()
    elif cmd == "static":
        static()
    elif cmd == "metrics" and args:
        metrics(args)
    else:
        sys.exit(__doc__)
