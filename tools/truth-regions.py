#!/usr/bin/env python3
"""Writes fixtures/NAME.regions.geojson from the regions listed in fixtures/NAME.truth.json.

    tools/truth-regions.py            # every fixture whose truth lists regions

Each truth region (id, centre, radius_m) becomes a GeoJSON Point feature with a `radius`
property, the input `keeptrack replay --regions` takes.
"""
import glob, json, os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for truth_path in sorted(glob.glob(os.path.join(ROOT, "fixtures", "*.truth.json"))):
    truth = json.load(open(truth_path))
    regions = truth.get("regions") or []
    if not regions:
        continue
    features = [{
        "type": "Feature", "id": r["id"],
        "geometry": {"type": "Point", "coordinates": [r["centre"][1], r["centre"][0]]},
        "properties": {"radius": r["radius_m"]},
    } for r in regions]
    out = truth_path.replace(".truth.json", ".regions.geojson")
    with open(out, "w") as f:
        json.dump({"type": "FeatureCollection", "features": features}, f, indent=1)
        f.write("\n")
    print(os.path.relpath(out, ROOT))
