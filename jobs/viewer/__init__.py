"""The run viewer: an event log's runs as one self-contained HTML page."""
