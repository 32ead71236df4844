-- Roles: who may do what in the admin (src/staff/roles.rs decides it).
-- Every account there was could do everything: each becomes an owner.
alter table staff add column role text not null default 'owner';
alter table staff add constraint staff_role_known
    check (role in ('owner', 'box_office', 'door'));

-- A request refused to a role is recorded like any action.
alter table staff_actions drop constraint staff_action_known;
alter table staff_actions add constraint staff_action_known check (action in (
    'login', 'logout', 'release_hold', 'set_capacity', 'repair_resource', 'retry_refund',
    'refund_order', 'redeem', 'refused'
));
