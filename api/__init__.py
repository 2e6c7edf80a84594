"""LiteHit HTTP job API (FastAPI)."""
