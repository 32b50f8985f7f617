"""The head's business logic, one module per resource; routers stay thin."""
