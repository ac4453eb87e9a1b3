"""Use cases: where formats, store, analysis and report meet. The CLI and the server call only
these, so that the two can never disagree. One module per use case."""

from perfci.usecases.parse import parse_profiles, profiles_document

__all__ = ["parse_profiles", "profiles_document"]
