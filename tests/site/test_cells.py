"""Row cells are read by name in templates (web/rows.Cells): a cell that exists renders its
value, one that does not renders as an unknown variable always does (empty), and `row[name]`
is the same lookup as `row.name`."""

from dataclasses import dataclass

import pytest
from django.template import Context, Template

from web.rows import Cells


@dataclass(frozen=True)
class Row(Cells):
    name: str
    count: int


def test_cells_render_by_name_and_unknown_names_render_empty():
    row = Row("Alpha <b>", 3)
    text = Template("{{ r.name }}|{{ r.count }}|{{ r.missing }}|{{ r.name.upper }}").render(
        Context({"r": row})
    )
    assert text == "Alpha &lt;b&gt;|3||ALPHA &lt;B&gt;"
    assert row["count"] == row.count
    with pytest.raises(AttributeError):
        row["missing"]
