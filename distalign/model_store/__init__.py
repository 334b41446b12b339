"""Where the model a command names comes from, and copying one to where a cluster's nodes read it.

``locate`` turns a Hub name, a local directory or a storage URI (``s3://``) into what ``from_pretrained`` reads on
this process, checked first; ``fetch`` is ``distalign model fetch``.
"""
