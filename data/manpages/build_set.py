"""Build a labelled rerank set from the Linux man pages that Debian ships (manpages, manpages-dev 6.03-2).

    python data/manpages/build_set.py --out data/manpages/pairs.jsonl

Why this text: nobody on this project wrote it, a package manager delivers the exact same bytes on
every machine (the .deb files are pinned by sha256 below), and every page carries its own SPDX licence.

One query per page: query = the page's NAME one-liner (the text after "\\-", without the function
names), relevant = the first words of its DESCRIPTION, hard negatives = the DESCRIPTION leads of the
other pages that BM25 ranks highest for the query. Pages whose one-liner or lead duplicates another's
are dropped, and pages of the same family (a shared name in NAME, or the same name stem) are never a
negative. Deterministic: same .deb bytes, same output, byte for byte. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from reranker_calibrate.bm25 import BM25

PACKAGES = {  # Debian 12 (bookworm) packages and the sha256 of the .deb files this set was built from
    "manpages_6.03-2_all.deb": "efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91",
    "manpages-dev_6.03-2_all.deb": "96f55cb5e26231d5567c89b692bced63825a14a2d5bd18fdf16ea2ed44eb9838",
}
SECTIONS = ("man2", "man3", "man4", "man5", "man7")
LEAD_WORDS = 120  # a DESCRIPTION lead of ~160 MiniLM tokens: fits max_model_len 256 without cutting
MIN_LEAD_WORDS = 25
MIN_QUERY_WORDS = 3
NEGATIVES = 7  # 8 candidates per query: the relevant page and 7 BM25 hard negatives
QUERIES = 500


@dataclass(frozen=True)
class Page:
    page: str  # "open(2)"
    names: tuple[str, ...]
    query: str
    lead: str
    licence: str

    @property
    def family(self) -> str:
        """Name stem shared by variants (wait/wait3/wait4, getpwnam/getpwnam_r, lseek/lseek64)."""
        return re.sub(r"(64|_r|\d+)$", "", self.names[0].lstrip("_"))


def download(dest: Path) -> list[Path]:
    """apt-get download the pinned versions into dest, and check their sha256."""
    debs = []
    for name, digest in PACKAGES.items():
        path = dest / name
        if not path.exists():
            package, version = name.split("_")[:2]
            subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=dest, check=True)
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            raise SystemExit(f"{path}: sha256 {actual} is not the pinned {digest}")
        debs.append(path)
    return debs


# groff's two-letter glyph names that plain text has a character for; any other \(xx glyph is dropped
_GLYPHS = {"aq": "'", "cq": "'", "dq": '"', "lq": '"', "rq": '"', "em": "-", "en": "-", "mi": "-", "hy": "-", "bu": "*"}
_ESCAPES = [
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""),  # font changes
    (re.compile(r"\\\((..)"), lambda glyph: _GLYPHS.get(glyph[1], "")),
    (re.compile(r"\\\[[^\]]*\]"), ""),
    (re.compile(r"\\\*(\(..|\[[^\]]*\]|.)"), ""),
    (re.compile(r"\\[-]"), "-"),
    (re.compile(r"\\[&|^%:]"), ""),
    (re.compile(r"\\[ ~0]"), " "),
    (re.compile(r"\\e"), "\\\\"),
    (re.compile(r"\\c$"), ""),
]
_FONT_MACROS = {".B", ".I", ".SM", ".SB"}
_ALTERNATING = {".BR", ".RB", ".BI", ".IB", ".IR", ".RI"}


def _unescape(text: str) -> str:
    for pattern, replacement in _ESCAPES:
        text = pattern.sub(replacement, text)
    return text.replace("\\\\", "\\")


def _macro_args(line: str) -> list[str]:
    return [a[1:-1] if len(a) > 1 and a.startswith('"') and a.endswith('"') else a
            for a in re.findall(r'"[^"]*"|\S+', line)]


def roff_text(lines: list[str]) -> str:
    """Plain text of roff lines: font macros become their words, other requests are dropped, and
    example blocks (.EX/.EE, .nf/.fi) are left out because they are code, not prose."""
    out: list[str] = []
    in_code = False
    for line in lines:
        request = line.split(maxsplit=1)[0] if line.startswith((".", "'")) else ""
        if request in (".EX", ".nf"):
            in_code = True
        elif request in (".EE", ".fi"):
            in_code = False
        elif in_code or line.startswith((".\\\"", "'\\\"")):
            continue
        elif request in _FONT_MACROS:
            out.append(" ".join(_macro_args(line)[1:]))
        elif request in _ALTERNATING:
            out.append("".join(_macro_args(line)[1:]))
        elif not request:
            out.append(line)
    return re.sub(r"\s+", " ", _unescape(" ".join(out))).strip()


def _sections(lines: list[str]) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.startswith(".SH"):
            current = " ".join(_macro_args(line)[1:]).upper()
            sections.setdefault(current, [])
        elif current is not None:
            sections[current].append(line.rstrip("\\").rstrip() if line.endswith("\\") else line)
    return sections


def parse_page(path: Path) -> Page | None:
    """The page's names, one-liner and DESCRIPTION lead; None for a .so link or a page without them."""
    text = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
    lines = text.splitlines()
    if any(line.startswith(".so ") for line in lines[:5]):
        return None
    licence = next((m.group(1) for m in (re.search(r"SPDX-License-Identifier:\s*(\S+)", ln) for ln in lines) if m), "NOASSERTION")
    sections = _sections(lines)
    name_line = roff_text(sections.get("NAME", []))
    if " - " not in name_line or "DESCRIPTION" not in sections:
        return None
    names_part, query = name_line.split(" - ", 1)
    words = roff_text(sections["DESCRIPTION"]).split()
    if len(words) < MIN_LEAD_WORDS or len(query.split()) < MIN_QUERY_WORDS:
        return None
    names = tuple(n.strip() for n in names_part.split(",") if n.strip())
    stem = path.name[: -len(".gz")]
    page = f"{stem.rsplit('.', 1)[0]}({stem.rsplit('.', 1)[1]})"
    return Page(page, names or (page,), query.strip(), " ".join(words[:LEAD_WORDS]), licence)


def read_pages(root: Path) -> list[Page]:
    paths = sorted(p for s in SECTIONS for p in (root / "usr/share/man" / s).glob("*.gz"))
    pages = [page for path in tqdm(paths, desc="parsing pages", unit="page", file=sys.stderr)
             if (page := parse_page(path)) is not None]
    # The package installs one page under each of its names (copies, not .so links): keep the first copy, with
    # every name. Then a one-liner or lead that two different pages share cannot say which is relevant: drop both.
    unique: dict[tuple[str, str], Page] = {}
    for p in pages:
        key = (p.query.lower(), p.lead)
        first = unique.setdefault(key, p)
        unique[key] = Page(first.page, tuple(dict.fromkeys(first.names + p.names)), first.query, first.lead, first.licence)
    pages = list(unique.values())
    queries, leads = Counter(p.query.lower() for p in pages), Counter(p.lead for p in pages)
    return [p for p in pages if queries[p.query.lower()] == 1 and leads[p.lead] == 1]


def same_family(a: Page, b: Page) -> bool:
    return a.family == b.family or bool(set(a.names) & set(b.names))


def build_rows(pages: list[Page], n_queries: int) -> list[dict]:
    bm25 = BM25([p.lead for p in pages])
    chosen = sorted(range(len(pages)), key=lambda i: hashlib.sha256(pages[i].page.encode()).hexdigest())[:n_queries]
    rows = []
    for qi in tqdm(sorted(chosen, key=lambda i: pages[i].page), desc="BM25 negatives", unit="query", file=sys.stderr):
        query = pages[qi]
        scores = [(bm25.score(query.query, j), j) for j in range(len(pages))]
        negatives = sorted(((-s, pages[j].page, j) for s, j in scores
                            if j != qi and s > 0 and not same_family(query, pages[j])))[:NEGATIVES]
        for label, j in [(1, qi)] + [(0, j) for _, _, j in negatives]:
            rows.append({
                "query": query.query, "document": pages[j].lead, "label": label,
                "query_page": query.page, "document_page": pages[j].page,
                "bm25": round(bm25.score(query.query, j), 6), "licence": pages[j].licence,
            })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--debs", type=Path, help="folder with the pinned .deb files (default: apt-get download)")
    parser.add_argument("--queries", type=int, default=QUERIES)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        debs = download(args.debs or work)
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "root")], check=True)
        pages = read_pages(work / "root")
    rows = build_rows(pages, args.queries)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(pages)} usable pages -> {len(rows)} pairs, {len({r['query'] for r in rows})} queries: {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
