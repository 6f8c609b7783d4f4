"""docs/operations.md is generated from the config key table (server.operations_doc)."""

from __future__ import annotations

from pathlib import Path

from tierlog.server.operations_doc import render_operations_doc


def test_operations_doc_is_up_to_date() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    assert doc.read_text(encoding="utf-8") == render_operations_doc(), (
        "regenerate with: tierlog docs --output docs/operations.md"
    )
