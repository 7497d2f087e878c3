"""Checks shared by the tests of the Grafana dashboards in benchmarks/grafana: their InfluxQL,
and their JSON against the Grafana schema (grafana-foundation-sdk)."""
import json
import re
from pathlib import Path
from extras import require


def queries(path: Path):
    """(panel title or "variable NAME", InfluxQL) of every target and query variable."""
    data = json.loads(path.read_text())
    found = [(panel["title"], target["query"]) for panel in data["panels"]
             for target in panel.get("targets", [])]
    found += [(f"variable {v['name']}", v["query"]) for v in data["templating"]["list"]
              if v["type"] == "query"]
    return found


def assert_every_query_returns_data(path: Path, influx, database: str, substitutions: dict):
    """Each query, with Grafana's variables filled in as ``substitutions`` says, returns
    series with values from ``influx`` (a benchmarks.servers.InfluxDB1)."""
    found = queries(path)
    for title, query in found:
        for name, value in substitutions.items():
            query = query.replace(name, value)
        assert not re.search(r"\$[\w{]", query), f"{title}: variable left in {query}"
        series = influx.query(query, database).get("series", [])
        assert series and all(s["values"] for s in series), f"{title}: no data for {query}"
    return found


def assert_decodes_with_the_grafana_schema(path: Path, variables: set):
    """The dashboard decodes into the schema's typed models, panel by panel, and every
    target and transformation survives a round trip; ``variables`` are among its own."""
    require("grafana_foundation_sdk")
    from grafana_foundation_sdk.cog import plugins, runtime
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard, DataSourceRef, RowPanel
    plugins.register_default_plugins()
    raw = json.loads(path.read_text())
    dashboard = Dashboard.from_json(raw)
    assert dashboard.uid == raw["uid"] and dashboard.title
    found = {v.name: v for v in dashboard.templating.list_val}
    assert found["datasource"].type_val == "datasource"
    assert variables <= set(found)
    assert len(dashboard.panels) == len(raw["panels"])
    for panel, source in zip(dashboard.panels, raw["panels"]):
        if isinstance(panel, RowPanel):
            continue
        # A known panel type whose options decode into its typed model.
        assert runtime.panelcfg_config(panel.type_val) is not None, panel.type_val
        assert not isinstance(panel.options, dict), f"{panel.title}: options not decoded"
        assert isinstance(panel.datasource, DataSourceRef)
        assert panel.datasource.uid == "${datasource}"
        assert panel.targets, panel.title
        # Nothing the schema knows is lost in a round trip.
        again = json.loads(json.dumps(panel, cls=JSONEncoder))
        assert again["targets"] == source["targets"]
        assert again["transformations"] == source.get("transformations", [])
