"""Analysis shared by every rule: names, scopes, roles of variables, the device in scope.

Written once here so that no rule re-implements import resolution or device lookup.
"""
