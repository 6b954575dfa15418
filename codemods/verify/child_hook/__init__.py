"""The startup hook (``sitecustomize``) that child processes of a verified script inherit."""
