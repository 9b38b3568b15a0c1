"""Placeholder: routes are being written."""

from fastapi import APIRouter

router = APIRouter()
