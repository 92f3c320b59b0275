"""Sessions: working context, index metadata, @@ references, query_session."""
