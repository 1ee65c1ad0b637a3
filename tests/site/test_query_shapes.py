"""web/shapes.per_thread: the hot queries' built shapes are kept per thread, because copies of a
QuerySet share its subqueries and compiling a subquery changes its alias counts while it runs;
gunicorn's threads must each compile their own."""

from concurrent.futures import ThreadPoolExecutor

from django.db.models import Subquery

from web import selectors, visitor_reads
from web.shapes import per_thread


def _in_another_thread(fn, *args):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args).result()


def test_one_answer_per_thread_and_arguments():
    built = []

    @per_thread
    def shape(kind, *, descending=False):
        built.append((kind, descending))
        return object()

    first = shape("live")
    assert shape("live") is first
    assert shape("live", descending=True) is not first
    assert shape("replay") is not first
    elsewhere = _in_another_thread(shape, "live")
    assert elsewhere is not first
    assert built == [("live", False), ("live", True), ("replay", False), ("live", False)]


def _subqueries(queryset):
    """The Query objects inside the shape's annotations: what a copy shares with its original."""
    found = []

    def walk(expression):
        if isinstance(expression, Subquery):
            found.append(expression.query)
        for source in expression.get_source_expressions():
            if source is not None:
                walk(source)

    for annotation in queryset.query.annotations.values():
        walk(annotation)
    return found


def test_no_thread_compiles_a_subquery_another_thread_holds():
    shapes = [
        lambda: visitor_reads._home_rows("live", "rank", False),
        lambda: visitor_reads._cohort_rows("live"),
        selectors._entry_figures,
    ]
    for build in shapes:
        here = _subqueries(build())
        there = _subqueries(_in_another_thread(build))
        assert here, "the shape has correlated subqueries"
        assert build() is build()
        assert {id(q) for q in here}.isdisjoint(id(q) for q in there)
