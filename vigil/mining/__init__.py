"""Mining: closed, human-resolved cases distilled into knowledge (case entries and FAQs), redacted, merged, reviewed."""
