#!/usr/bin/env python3
"""`helm template` + schema validation for the reranker chart, without a helm binary.

There is no Linux helm binary on the package registries this project can reach (Debian 12 has
no helm package; npm has none; PyPI's `helm-package` carries only macOS/Windows builds). The
PyPI package `helm-python-sdk` binds Helm's own Go SDK (Helm v4, through the shared library
`libhelm_c`), so this renders with Helm's real template engine, values coalescing and
`values.schema.json` check -- the same code path as `helm template` -- and then validates
every manifest against the Kubernetes OpenAPI schemas shipped in `kubernetes-validate`.
The ServiceMonitor and PrometheusRule (Prometheus Operator CRDs, not in those schemas) are checked
against hand-written subsets of their CRD schemas in deploy/helm/schemas/.

    python deploy/helm/render.py deploy/helm/reranker -f my-values.yaml --set gpusPerPod=2
    python deploy/helm/render.py deploy/helm/reranker --validate --kube-version 1.30.0 -o out.yaml
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any, Iterable

import yaml

HERE = Path(__file__).resolve().parent
CHART_DIR = HERE / "reranker"
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): HERE / "schemas" / "servicemonitor-v1-subset.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): HERE / "schemas" / "prometheusrule-v1-subset.json",
}
# Kubernetes versions the chart is validated against by default (oldest and newest schema sets
# kubernetes-validate 1.37 ships that the chart supports, plus one between).
DEFAULT_KUBE_VERSIONS = ("1.27.0", "1.31.0", "1.37.0")


def deep_merge(base: dict, over: dict) -> dict:
    """Helm's coalescing of two value maps: maps merge recursively, anything else replaces,
    and null deletes the key."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def render(
    chart_dir: str | Path = CHART_DIR,
    values: dict | None = None,
    *,
    name: str = "reranker",
    namespace: str = "default",
) -> dict[str, str]:
    """``{template path: rendered text}``, like ``helm template``. Raises helm_python's
    HelmValuesError when the values break values.schema.json, HelmRenderError on a template
    ``fail``/``required``."""
    import helm_python as helm

    with helm.Chart.load(str(chart_dir)) as chart:
        return chart.render(values or {}, name=name, namespace=namespace, is_install=True)


def manifests(rendered: dict[str, str]) -> list[dict]:
    """Every Kubernetes object of a render (NOTES.txt and empty documents left out)."""
    docs = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(rendered[path]):
            if doc:
                docs.append(doc)
    return docs


def validate(docs: Iterable[dict], kube_versions: Iterable[str] = DEFAULT_KUBE_VERSIONS) -> list[str]:
    """Errors (empty list: all valid). Strict: unknown fields are errors too."""
    import jsonschema
    import kubernetes_validate

    errors = []
    for doc in docs:
        key = (doc.get("apiVersion"), doc.get("kind"))
        ident = f"{key[1]}/{doc.get('metadata', {}).get('name')}"
        if key in CRD_SCHEMAS:
            schema = json.loads(CRD_SCHEMAS[key].read_text())
            for err in jsonschema.Draft7Validator(schema).iter_errors(doc):
                errors.append(f"{ident}: {err.json_path}: {err.message}")
            continue
        for version in kube_versions:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                errors.append(f"{ident} (k8s {version}): {exc.message} at {list(exc.path)}")
            except kubernetes_validate.SchemaNotFoundError:
                errors.append(f"{ident} (k8s {version}): no schema for {key[0]} {key[1]}")
    return errors


def load_values(files: list[str], sets: list[str]) -> dict:
    values: dict[str, Any] = {}
    for f in files:
        values = deep_merge(values, yaml.safe_load(Path(f).read_text()) or {})
    if sets:
        import helm_python as helm

        for s in sets:
            values = deep_merge(values, helm.parse_set_string(s))
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="helm template (Helm SDK) + Kubernetes schema validation")
    ap.add_argument("chart", nargs="?", default=str(CHART_DIR))
    ap.add_argument("-f", "--values", action="append", default=[], help="values file (repeatable)")
    ap.add_argument("--set", action="append", default=[], help="key=value[,key=value] (repeatable)")
    ap.add_argument("--name", default="reranker", help="release name")
    ap.add_argument("-n", "--namespace", default="default")
    ap.add_argument("--validate", action="store_true", help="validate every manifest (kubernetes-validate)")
    ap.add_argument("--kube-version", action="append", help=f"default: {', '.join(DEFAULT_KUBE_VERSIONS)}")
    ap.add_argument("-o", "--output", help="write the manifests here instead of stdout")
    args = ap.parse_args(argv)

    rendered = render(args.chart, load_values(args.values, args.set), name=args.name, namespace=args.namespace)
    text = "".join(
        f"---\n# Source: {path}\n{body.strip()}\n"
        for path, body in sorted(rendered.items())
        if not path.endswith("NOTES.txt") and body.strip()
    )
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    if args.validate:
        docs = manifests(rendered)
        errors = validate(docs, args.kube_version or DEFAULT_KUBE_VERSIONS)
        for e in errors:
            print(f"INVALID {e}", file=sys.stderr)
        print(f"{len(docs)} manifests, {len(errors)} errors", file=sys.stderr)
        return 1 if errors else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
