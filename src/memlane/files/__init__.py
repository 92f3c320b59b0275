"""Human-readable files: session folders, memory Markdown, git, the watcher."""
