"""What the driver is: literal calls for every function the app may call, conveniences, the DBA's Admin."""

from __future__ import annotations

import inspect

from agentmem.admin import Admin
from agentmem.calls import Calls, literal
from agentmem.client import AsyncMemory, Memory
from agentmem.conveniences import AsyncConveniences, Conveniences

CONVENIENCES = {"remember", "recall", "cached_answer", "store_answer", "extract_facts"}
ADMIN = {"apply_retention", "schedule_retention", "unschedule_retention", "set_default_retention_policy",
         "clear_default_retention_policy", "register_model", "grant_app_role", "retention_health"}


def literals(cls) -> set[str]:
    return {n for c in cls.__mro__ for n, v in vars(c).items() if isinstance(v, literal)}


def test_one_literal_method_per_function_the_app_role_may_call_and_the_dba_ones_on_admin(admin):
    callable_by = dict(admin.execute(
        "select distinct p.proname, has_function_privilege('agentmem_app', p.oid, 'execute') "
        "from pg_proc as p where p.pronamespace = 'agentmem'::regnamespace").fetchall())
    app = {n for n, ok in callable_by.items() if ok}
    # set_tenant has no method: every call runs set_tenant(tenant_id => ..., local => true) first
    assert literals(Calls) == app - {"set_tenant"}
    assert literals(Admin) == ADMIN
    assert {n for n, ok in callable_by.items() if not ok} == ADMIN - {"retention_health"}
    for name in ADMIN:
        assert not hasattr(Memory, name) and not hasattr(AsyncMemory, name), name


def test_each_literal_method_is_one_select_from_its_own_function():
    import ast
    for cls in (Calls, Admin):
        for name in literals(cls):
            body = ast.parse(inspect.getsource(getattr(cls, name).fn).lstrip().replace("\n    ", "\n")).body[0]
            call = body.body[-1].value  # return one|rows|value|nothing(..., "select ... agentmem.<name>(...)", ...)
            while isinstance(call.func, ast.Attribute):  # .then(post)
                call = call.func.value
            text = "".join(a.value for a in ast.walk(call) if isinstance(a, ast.Constant) and isinstance(a.value, str))
            assert text.startswith("select ") and f"agentmem.{name}" in text, (name, text)


def test_sync_methods_return_values_and_async_methods_return_awaitables(app_url):
    import asyncio
    mem = Memory(pool=None, tenant="acme")
    amem = AsyncMemory(pool=None, tenant="acme")
    for name in literals(Calls) | CONVENIENCES:
        assert not inspect.iscoroutinefunction(getattr(mem, name)), name
        assert inspect.iscoroutinefunction(getattr(amem, name)), name
        assert inspect.signature(getattr(mem, name)) == inspect.signature(getattr(amem, name)), name
    for name in CONVENIENCES:
        assert name in vars(Conveniences) and name in vars(AsyncConveniences), name
    assert "conn" in inspect.signature(mem.cache_lookup).parameters
    assert "self" not in inspect.signature(mem.cache_lookup).parameters

    async def go():
        async with await AsyncMemory.connect(app_url, tenant="acme", max_size=1) as a:
            return await a.question_guard_agrees("Can I get a refund?", "Can I get a refund after 30 days?")
    assert asyncio.run(go()) is False
    with Memory.connect(app_url, tenant="acme", max_size=1) as m:
        assert m.question_guard_agrees("How do I reset my password?", "how do i reset my password") is True
