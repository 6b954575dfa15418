"""`devmod review`: the pull-request bot.

- ``event``: which pull request, from the Actions event or flags;
- ``gitdiff``: what the PR changes, read from the local git checkout;
- ``suggestions``: engine output turned into line-anchored fixes (shared with ``--format rdjson``);
- ``payload``: those fixes turned into one GitHub review (comments, body, markers);
- ``github_client``: the GitHub API through githubkit, with retries and clear errors (``errors``);
- ``runner``: one run end to end; ``fixpr``: the fix pull request mode; ``command``: the click command.

Only ``github_client`` needs the optional ``review`` extra; the rest is plain Python.
"""

# Where rule links in comments point: the rule catalogue (docs/rules.md) of devmod's repository.
RULES_DOC_URL = "https://github.com/devmod/devmod/blob/main/docs/rules.md"
