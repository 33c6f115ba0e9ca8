"""Code review: the reviewer's findings and their anchoring in a pull request's diff, publishing
them as one GitHub review, and the review guidelines the analyzer learns per repository."""
