#!/usr/bin/env python3
"""What pip installs with Home Assistant for the tests against a real one (tools/setup).

    tools/homeassistant-requirements.py WHEEL OUTDIR

Reads the homeassistant wheel (a zip) and writes into OUTDIR:
- constraints.txt: Home Assistant's own pins (homeassistant/package_constraints.txt, inside the wheel),
  plus josepy<2 (josepy 2 breaks hass_nabucasa, which the OwnTracks config flow imports through
  `cloud`). Without the pins pip backtracks into source builds.
- requirements.txt: the requirements of the integrations Home Assistant loads in the tests, from
  their manifests: the core and default integrations it always sets up (bootstrap.py's lists; a
  default one that cannot import puts it in recovery mode), the ones the tests configure (recorder,
  history, mqtt, owntracks, zone), and everything those depend on or load after (`dependencies`,
  `after_dependencies`), plus `stream`, which `camera` (an MQTT platform) imports. Home Assistant
  is run with --skip-pip: nothing is installed while testing.
"""
import json
import os
import sys
import zipfile

ALWAYS = {
    # bootstrap.py: CORE_INTEGRATIONS, LOGGING_INTEGRATIONS, DEFAULT_INTEGRATIONS, RECORDER_INTEGRATIONS
    "homeassistant", "persistent_notification", "logger", "system_log",
    "application_credentials", "backup", "frontend", "hardware", "network", "system_health",
    "automation", "person", "scene", "script", "tag", "zone", "counter", "input_boolean", "input_button",
    "input_datetime", "input_number", "input_select", "input_text", "schedule", "timer", "recorder",
}
TESTED = {"history", "mqtt", "owntracks", "device_tracker", "sensor", "webhook", "stream"}


def main():
    wheel, out = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())

        def manifest(domain):
            path = f"homeassistant/components/{domain}/manifest.json"
            return json.loads(z.read(path)) if path in names else None

        seen, todo, requirements = set(), sorted(ALWAYS | TESTED), set()
        while todo:
            domain = todo.pop()
            if domain in seen:
                continue
            seen.add(domain)
            m = manifest(domain)
            if m is None:
                continue
            requirements.update(m.get("requirements", []))
            todo += m.get("dependencies", []) + m.get("after_dependencies", [])
        constraints = z.read("homeassistant/package_constraints.txt").decode()
    with open(os.path.join(out, "constraints.txt"), "w") as f:
        f.write(constraints + "\njosepy<2\n")
    with open(os.path.join(out, "requirements.txt"), "w") as f:
        f.write("\n".join(sorted(requirements)) + "\n")
    print(f"{len(requirements)} requirements of {len(seen)} integrations", file=sys.stderr)


if __name__ == "__main__":
    main()
