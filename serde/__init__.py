"""The data model of streamagents: messages with content parts, media refs, events, schemas."""
