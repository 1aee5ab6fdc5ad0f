"""Knowledge files: help articles (Markdown), FAQs (YAML or CSV) and document exports (JSON/JSONL) as entries.

An article is cited as a whole but retrieved in passages: it is split along its headings, and each passage keeps the
article's id as its ``source``. A file that cannot be read raises ``KnowledgeFileError`` naming the file and line;
nothing of a bad file is loaded.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Literal

import yaml

from vigil.core.errors import VigilError

EntryKind = Literal["article", "faq", "document", "case"]
SUFFIXES = (".md", ".markdown", ".yaml", ".yml", ".csv", ".json", ".jsonl")
_HEADING = re.compile(r"^(#{1,3})\s+(.+?)\s*#*\s*$", re.MULTILINE)
_ID = re.compile(r"^[^\s#]{1,200}$")  # "#" separates an entry's id from its passage number
_TENANT = re.compile(r"^[^\x00-\x1f\x7f*]{1,256}$")  # as a wire-format tenant id; "*" means all to the panel
PASSAGE_MAX_CHARS = 1500


class KnowledgeFileError(VigilError):
    """A knowledge file that cannot be loaded; the message names the file and, where known, the line."""

    def __init__(self, path: Path, problem: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrievable piece of an entry (a section of an article; an FAQ's question and answer)."""

    id: str
    heading: str | None
    text: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One knowledge entry, as cited in a suggestion's sources."""

    id: str
    kind: EntryKind
    title: str
    body: str
    origin: str
    """Where it came from: a file path, or a mined case's id."""
    tags: tuple[str, ...] = ()
    url: str | None = None
    product: str | None = None
    questions: tuple[str, ...] = ()
    """For an FAQ: its question and the alternates customers use."""
    passages: tuple[Passage, ...] = field(default=())
    tenant: str | None = None
    """The one tenant whose conversations may see it; None (the default) for every tenant."""
    expires_at: datetime | None = None
    """From when it is no longer served (a price that ends, a promotion); None (the default): never."""

    @property
    def digest(self) -> str:
        """A hash of the content, so a re-import only re-embeds what changed."""
        content: list[object] = [self.kind, self.title, self.body, self.tags, self.url, self.product, self.questions]
        if self.tenant is not None:  # only then: a global entry keeps the digest it had before tenants existed
            content.append(self.tenant)
        if self.expires_at is not None:  # likewise
            content.append(self.expires_at.isoformat())
        return hashlib.sha256(json.dumps(content).encode()).hexdigest()[:32]


def discover(paths: Iterable[Path]) -> list[Path]:
    """The knowledge files under ``paths`` (files as given; folders searched recursively), sorted."""
    found: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found.update(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        elif path.is_file():
            found.add(path)
        else:
            raise KnowledgeFileError(path, "no such file or folder")
    return sorted(p for p in found if p.name.lower() != "readme.md")


def read(path: Path) -> list[Entry]:
    """Every entry in one file. Raises ``KnowledgeFileError``."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise KnowledgeFileError(path, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise KnowledgeFileError(path, exc.strerror or str(exc)) from exc
    suffix = path.suffix.lower()
    if suffix in (".md", ".markdown"):
        return [_article(path, text)]
    if suffix in (".yaml", ".yml"):
        return _faq_yaml(path, text)
    if suffix == ".csv":
        return _faq_csv(path, text)
    if suffix == ".json":
        return _documents(path, _json(path, text))
    if suffix == ".jsonl":
        return _documents(path, list(_jsonl(path, text)))
    raise KnowledgeFileError(path, f"unknown kind of file {suffix!r}; use one of {', '.join(SUFFIXES)}")


def _article(path: Path, text: str) -> Entry:
    if not text.startswith("---"):
        raise KnowledgeFileError(path, "an article starts with YAML front matter (---)", 1)
    end = text.find("\n---", 3)
    if end < 0:
        raise KnowledgeFileError(path, "the front matter is not closed with ---", 1)
    try:
        meta = yaml.safe_load(text[3:end]) or {}
    except yaml.YAMLError as exc:
        line = exc.problem_mark.line + 1 if getattr(exc, "problem_mark", None) else 1  # type: ignore[attr-defined]
        raise KnowledgeFileError(path, f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}", line) from exc
    except ValueError as exc:  # a value YAML reads as a date or a time that is none ("2027-13-01")
        raise KnowledgeFileError(path, f"front matter holds a value that is not what it looks like: {exc}", 1) from exc
    if not isinstance(meta, dict):
        raise KnowledgeFileError(path, "the front matter must be a mapping", 1)
    entry_id = _entry_id(path, meta.get("id"), 1)
    title = _text(path, meta.get("title"), "title", 1)
    body = text[end + 4 :].strip()
    if not body:
        raise KnowledgeFileError(path, "the article has no text")
    return Entry(
        id=entry_id,
        kind="article",
        title=title,
        body=body,
        origin=str(path),
        tags=_tags(path, meta.get("tags")),
        url=_optional(meta.get("url")),
        product=_optional(meta.get("product")),
        passages=tuple(split_sections(entry_id, title, body)),
        tenant=_tenant(path, meta.get("tenant"), 1),
        expires_at=_expires(path, meta.get("expires"), 1),
    )


def split_sections(entry_id: str, title: str, body: str) -> Iterator[Passage]:
    """Split Markdown along its headings; long sections are cut at paragraph breaks."""
    marks = list(_HEADING.finditer(body))
    sections: list[tuple[str | None, str]] = []
    intro = body[: marks[0].start()] if marks else body
    if intro.strip():
        sections.append((None, intro.strip()))
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(body)
        content = body[mark.end() : end].strip()
        if content:
            sections.append((mark.group(2).strip(), content))
    number = 0
    for heading, content in sections:
        for chunk in _chunks(content):
            number += 1
            prefix = f"{title}: {heading}" if heading else title
            yield Passage(id=f"{entry_id}#{number}", heading=heading, text=f"{prefix}\n{chunk}")


def _chunks(content: str) -> Iterator[str]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", content) if p.strip()]
    current = ""
    for paragraph in paragraphs:
        if current and len(current) + len(paragraph) > PASSAGE_MAX_CHARS:
            yield current
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        yield current


def _faq_yaml(path: Path, text: str) -> list[Entry]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = exc.problem_mark.line + 1 if getattr(exc, "problem_mark", None) else None  # type: ignore[attr-defined]
        raise KnowledgeFileError(path, f"not valid YAML: {getattr(exc, 'problem', exc)}", line) from exc
    except ValueError as exc:  # a value YAML reads as a date or a time that is none ("2027-13-01")
        raise KnowledgeFileError(path, f"holds a value that is not what it looks like: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("faqs"), list):
        raise KnowledgeFileError(path, "an FAQ file holds `faqs:` with a list of {id, question, answer}")
    lines = _yaml_item_lines(text)
    tenant = _tenant(path, doc.get("tenant"), None)  # the file's tenant; an FAQ may name its own
    return [_faq(path, item, lines[i] if i < len(lines) else None, tenant) for i, item in enumerate(doc["faqs"])]


def _yaml_item_lines(text: str) -> list[int]:
    """The line of each top-level list item under ``faqs:`` (for error messages)."""
    return [n for n, line in enumerate(text.splitlines(), start=1) if re.match(r"^\s{0,4}-\s", line)]


def _faq_csv(path: Path, text: str) -> list[Entry]:
    reader = csv.DictReader(text.splitlines())
    missing = {"id", "question", "answer"} - set(reader.fieldnames or ())
    if missing:
        raise KnowledgeFileError(path, f"the header lacks {', '.join(sorted(missing))}", 1)
    entries = []
    for row in reader:
        line = reader.line_num
        if None in row:
            raise KnowledgeFileError(path, "more fields than the header names", line)
        alternates = [a.strip() for a in (row.get("alternates") or "").split("|") if a.strip()]
        entries.append(_faq(path, {**row, "alternates": alternates}, line))
    return entries


def _faq(path: Path, item: object, line: int | None, tenant: str | None = None) -> Entry:
    if not isinstance(item, dict):
        raise KnowledgeFileError(path, "each FAQ is a mapping with id, question and answer", line)
    entry_id = _entry_id(path, item.get("id"), line)
    question = _text(path, item.get("question"), "question", line)
    answer = _text(path, item.get("answer"), "answer", line)
    alternates = item.get("alternates") or []
    if not isinstance(alternates, list) or not all(isinstance(a, str) and a.strip() for a in alternates):
        raise KnowledgeFileError(path, f"{entry_id}: alternates must be a list of questions", line)
    questions = (question, *(a.strip() for a in alternates))
    return Entry(
        id=entry_id,
        kind="faq",
        title=question,
        body=answer,
        origin=str(path),
        questions=questions,
        tags=_tags(path, item.get("tags")),
        passages=(Passage(id=f"{entry_id}#1", heading=None, text=f"{question}\n{answer}"),),
        tenant=_tenant(path, item.get("tenant"), line) or tenant,
        expires_at=_expires(path, item.get("expires"), line),
    )


def _json(path: Path, text: str) -> list[Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KnowledgeFileError(path, f"not valid JSON: {exc.msg}", exc.lineno) from exc
    if isinstance(doc, dict) and isinstance(doc.get("documents"), list):
        doc = doc["documents"]
    if not isinstance(doc, list):
        raise KnowledgeFileError(path, "a JSON file holds a list of documents (or {documents: [...]})", 1)
    return doc


def _jsonl(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise KnowledgeFileError(path, f"not valid JSON: {exc.msg}", number) from exc


def _documents(path: Path, items: list[Any]) -> list[Entry]:
    entries = []
    for index, item in enumerate(items):
        line, doc = item if isinstance(item, tuple) else (None, item)
        where = line or None
        if not isinstance(doc, dict):
            raise KnowledgeFileError(path, f"document {index + 1} is not an object", where)
        entry_id = _entry_id(path, doc.get("id"), where)
        title = _text(path, doc.get("title"), "title", where)
        content = _text(path, doc.get("content"), "content", where)
        entries.append(
            Entry(
                id=entry_id,
                kind="document",
                title=title,
                body=content,
                origin=str(path),
                tags=_tags(path, doc.get("tags")),
                url=_optional(doc.get("url")),
                passages=tuple(split_sections(entry_id, title, content)),
                tenant=_tenant(path, doc.get("tenant"), where),
                expires_at=_expires(path, doc.get("expires"), where),
            )
        )
    return entries


def _entry_id(path: Path, value: object, line: int | None) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise KnowledgeFileError(path, f"id {value!r} is not a valid id (1-200 characters, no spaces or #)", line)
    return value


def _tenant(path: Path, value: object, line: int | None) -> str | None:
    """An entry's tenant: absent or empty means every tenant."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _TENANT.match(value.strip()):
        raise KnowledgeFileError(path, f"tenant {value!r} is not a tenant id (1-256 characters, not *)", line)
    return value.strip()


def _expires(path: Path, value: object, line: int | None) -> datetime | None:
    """An entry's expiry: absent or empty means never; a date means midnight UTC at its start (from that day on it
    is not served), a date and time without a zone is taken as UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        with contextlib.suppress(ValueError):  # refused below, as any other value that is not a date
            value = datetime.fromisoformat(value.strip())
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise KnowledgeFileError(path, f"expires {value!r} is not a date (2027-03-31) or a date and time", line)


def _text(path: Path, value: object, name: str, line: int | None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise KnowledgeFileError(path, f"{name} is missing or empty", line)
    return value.strip()


def _optional(value: object) -> str | None:
    return str(value).strip() if value is not None and str(value).strip() else None


def _tags(path: Path, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(t.strip() for t in value.split(",") if t.strip())
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return tuple(value)
    raise KnowledgeFileError(path, "tags must be a list of words")
