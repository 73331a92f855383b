"""setup.cfg says MIT: the licence text is in the repository and named for the wheel."""
import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_mit_licence_setup_cfg_names_is_there():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    metadata = config["metadata"]
    assert metadata["license"] == "MIT"
    text = (REPO / metadata["license_files"]).read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "Copyright (c) 2026 the minigrad authors" in text
