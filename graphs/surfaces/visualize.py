"""Draw a namespace's event graph as one self-contained HTML file (inline SVG, no scripts from outside).

Events are dots coloured by topic, relations are arrows coloured by type; hovering shows the text.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import networkx as nx

from logicmap.memory.indexes.graph import EventGraph

__all__ = ["render_event_graph_html", "write_event_graph", "write_event_graph_html", "write_event_graph_png"]

_PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1b9e77",
    "#d95f02",
    "#7570b3",
    "#e7298a",
    "#66a61e",
    "#e6ab02",
]


def _layout(graph: EventGraph, width: float, height: float) -> dict[str, tuple[float, float]]:
    simple = nx.Graph()
    simple.add_nodes_from(graph.ids)
    simple.add_edges_from((u, v) for u, v, _ in graph.graph.edges(keys=True))
    # Events of one topic attract each other, so topics show as clusters.
    by_topic: dict[str, list[str]] = {}
    for eid in graph.ids:
        by_topic.setdefault(graph.topic_of.get(eid, "none"), []).append(eid)
    for members in by_topic.values():
        for a, b in zip(members, members[1:]):
            if not simple.has_edge(a, b):
                simple.add_edge(a, b, weight=0.5)
    if not graph.ids:
        return {}
    pos = nx.spring_layout(simple, seed=7, k=1.5 / math.sqrt(max(len(graph.ids), 1)))
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0
    pad = 60
    return {
        n: (pad + (p[0] - min(xs)) / span_x * (width - 2 * pad), pad + (p[1] - min(ys)) / span_y * (height - 2 * pad))
        for n, p in pos.items()
    }


def _svg(
    graph: EventGraph,
    pos: dict[str, tuple[float, float]],
    topic_color: dict[str, str],
    label_color: dict[str, str],
    width: int,
    height: int,
) -> str:
    """Events as dots coloured by topic, relations as arrows coloured by label, with hover titles."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        "<defs>",
    ]
    for label, color in label_color.items():
        safe = html.escape(label)
        parts.append(
            f'<marker id="arrow-{safe}" viewBox="0 0 10 10" refX="16" refY="5" markerWidth="6" markerHeight="6" '
            f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{color}"/></marker>'
        )
    parts.append("</defs>")
    for u, v, label in graph.graph.edges(keys=True):
        if u not in pos or v not in pos:
            continue
        (x1, y1), (x2, y2) = pos[u], pos[v]
        color = label_color.get(label, "#999")
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" stroke-width="1.6" '
            f'stroke-opacity="0.75" marker-end="url(#arrow-{html.escape(label)})"><title>{html.escape(f"{u} {label} {v}")}</title></line>'
        )
    for eid in graph.ids:
        x, y = pos[eid]
        event = graph.events[eid]
        topic = graph.topic_of.get(eid, "none")
        tip = f"{eid} [{topic}] {event.time or ''}\n{event.summary}\nturns: {', '.join(event.turn_ids)}"
        parts.append(
            f'<g><circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="{topic_color.get(topic, "#ccc")}" stroke="#333">'
            f"<title>{html.escape(tip)}</title></circle>"
            f'<text x="{x + 11:.1f}" y="{y + 4:.1f}" font-size="11" font-family="sans-serif">{html.escape(eid)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render_event_graph_html(graph: EventGraph, title: str | None = None, width: int = 1200, height: int = 800) -> str:
    """The HTML page for an event graph."""
    pos = _layout(graph, width, height)
    topics = sorted({t for t in graph.topic_of.values()})
    topic_color = {t: _PALETTE[i % len(_PALETTE)] for i, t in enumerate(topics)}
    labels = sorted(graph.relation_labels())
    label_color = {label: _PALETTE[(i + 5) % len(_PALETTE)] for i, label in enumerate(labels)}
    svg = _svg(graph, pos, topic_color, label_color, width, height)
    legend_topics = "".join(
        f'<li><span style="background:{c}"></span>{html.escape(t)} ({sum(1 for x in graph.topic_of.values() if x == t)} events)</li>'
        for t, c in topic_color.items()
    )
    counts = graph.relation_labels()
    legend_labels = "".join(
        f'<li><span style="background:{c}"></span>{html.escape(label)} ({counts[label]})</li>'
        for label, c in label_color.items()
    )
    stats = graph.stats()
    heading = html.escape(title or f"LogicMap event graph: {graph.namespace}")
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{heading}</title>
<style>
body {{ font-family: sans-serif; margin: 16px; color: #222; }}
.wrap {{ display: flex; gap: 24px; align-items: flex-start; }}
svg {{ border: 1px solid #ddd; background: #fcfcfc; }}
ul {{ list-style: none; padding: 0; }} li {{ margin: 3px 0; font-size: 13px; }}
li span {{ display: inline-block; width: 12px; height: 12px; margin-right: 6px; vertical-align: middle; }}
</style></head><body>
<h1>{heading}</h1>
<p>{stats["events"]} events, {stats["relations"]} relations, {stats["topics"]} topics, {stats["turns"]} turns in {stats["sessions"]} sessions. Hover a dot or an arrow for details.</p>
<div class="wrap">{svg}
<div><h3>Topics</h3><ul>{legend_topics}</ul><h3>Relations</h3><ul>{legend_labels}</ul></div></div>
</body></html>
"""


def write_event_graph_html(graph: EventGraph, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render_event_graph_html(graph), encoding="utf-8")
    return path


def write_event_graph_png(graph: EventGraph, path: str | Path, width: float = 14, height: float = 9) -> Path:
    """The same picture as a PNG (matplotlib, Agg): dots coloured by topic, arrows coloured by relation type."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    path = Path(path)
    pos = _layout(graph, 1000, 700)
    topics = sorted(set(graph.topic_of.values()))
    topic_color = {t: _PALETTE[i % len(_PALETTE)] for i, t in enumerate(topics)}
    labels = sorted(graph.relation_labels())
    label_color = {label: _PALETTE[(i + 5) % len(_PALETTE)] for i, label in enumerate(labels)}
    fig, ax = plt.subplots(figsize=(width, height))
    for u, v, label in graph.graph.edges(keys=True):
        (x1, y1), (x2, y2) = pos[u], pos[v]
        ax.annotate(
            "",
            xy=(x2, y2),
            xytext=(x1, y1),
            arrowprops={"arrowstyle": "->", "color": label_color[label], "alpha": 0.7, "lw": 1.2},
        )
    for eid in graph.ids:
        x, y = pos[eid]
        ax.scatter(
            [x], [y], s=160, color=topic_color.get(graph.topic_of.get(eid, ""), "#ccc"), edgecolors="#333", zorder=3
        )
        ax.text(x + 8, y + 4, eid, fontsize=8, zorder=4)
    handles = [Line2D([], [], marker="o", linestyle="", color=c, label=f"topic {t}") for t, c in topic_color.items()]
    handles += [Line2D([], [], color=c, label=label) for label, c in label_color.items()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    stats = graph.stats()
    ax.set_title(
        f"{graph.namespace}: {stats['events']} events, {stats['relations']} relations, {stats['topics']} topics"
    )
    ax.invert_yaxis()
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_event_graph(graph: EventGraph, path: str | Path) -> Path:
    """HTML or PNG by the file's suffix."""
    return (
        write_event_graph_png(graph, path)
        if str(path).lower().endswith(".png")
        else write_event_graph_html(graph, path)
    )
