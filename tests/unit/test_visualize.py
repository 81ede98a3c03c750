"""The event graph picture: a self-contained HTML page and a PNG."""

from __future__ import annotations

from logicmap.graphs.surfaces.cli import main
from logicmap.graphs.surfaces.visualize import render_event_graph_html, write_event_graph
from logicmap.memory.indexes.graph import EventGraph


def test_html_shows_every_event_topic_and_relation_type(ingested_sample) -> None:
    graph = EventGraph.of(ingested_sample.store.snapshot("sample"))
    page = render_event_graph_html(graph)
    assert page.startswith("<!doctype html>") and "<script" not in page
    assert page.replace('xmlns="http://www.w3.org/2000/svg"', "").count("http") == 0  # nothing fetched from outside
    assert all(f">{eid}</text>" in page for eid in graph.ids)
    assert all(label in page for label in graph.relation_labels())
    assert page.count("<circle") == len(graph.ids)
    assert page.count("<line") == graph.graph.number_of_edges()


def test_png_by_suffix(ingested_sample, tmp_path) -> None:
    out = write_event_graph(EventGraph.of(ingested_sample.store.snapshot("sample")), tmp_path / "g.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_graph_command_on_an_unknown_namespace_is_a_clear_error(tmp_path, capsys) -> None:
    code = main(["--data-dir", str(tmp_path / "m"), "--embeddings", "hashing", "graph", "-n", "nobody"])
    assert code == 2 and "unknown namespace 'nobody'" in capsys.readouterr().err
