"""Data: manifests, fetch, format readers, preprocessing, embeddings, batching."""
