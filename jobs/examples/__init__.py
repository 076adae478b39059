"""Example jobs: the support-tickets spec, its tools and its generated sample data."""
