"""Result files, baselines, reports, the failure ledger, provenance and secret redaction."""
