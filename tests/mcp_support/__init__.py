"""Helpers of the MCP tests: a small MCP server script and a directory plugin with a prefetch."""
